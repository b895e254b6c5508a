"""ServeConfig, what `mtkit serve` is told (each option's default and help declared once, in its field), and
CLI_DEFAULTS, the search options `mtkit translate` sets when given none. Plain data and its checks; no serving.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from mtkit.engines.config import EngineConfig
from mtkit.errors import check
from mtkit.search.config import TranslateConfig

# `mtkit translate` leaves beam, length rules, batch size and workers to the run's recipe and sets these to
# TranslateConfig's defaults; the service passes the same, so it answers as the command line does.
CLI_DEFAULTS: dict[str, Any] = {
    f.name: f.default
    for f in dataclasses.fields(TranslateConfig)
    if f.name in ("nbest", "sampling", "top_k", "top_p", "temperature")
}


@dataclass
class ServeConfig:
    """How the service listens, what it runs on, and the limits it holds every request to."""

    host: str = field(default="127.0.0.1", metadata={"help": "Address to listen on (loopback unless told otherwise)."})
    port: int = field(default=8080, metadata={"help": "TCP port (0: any free port, printed on stderr)."})
    engine: EngineConfig = field(
        default_factory=EngineConfig,
        metadata={"help": "The engine that runs the models and on what: --engine, --device, --dtype, --threads..."},
    )
    workers: int | None = field(
        default=None,
        metadata={
            "help": "Batches decoded at once on CPU (CTranslate2's inter_threads; "
            f"default: the run's translate.workers, {TranslateConfig.workers})."
        },
    )
    max_batch_tokens: int | None = field(
        default=None,
        metadata={
            "help": f"Source tokens decoded together (default: the run's translate.batch_tokens, "
            f"{TranslateConfig.batch_tokens})."
        },
    )
    max_delay_ms: float = field(
        default=5.0, metadata={"help": "Wait this long after a request for others to batch with it."}
    )
    max_lines: int = field(default=1000, metadata={"help": "Most lines per request (413 above)."})
    max_bytes: int = field(default=1 << 20, metadata={"help": "Largest request body in bytes (413 above)."})
    max_beam: int = field(default=16, metadata={"help": "Largest beam a request may ask for (422 above)."})
    max_file_bytes: int = field(
        default=20 << 20, metadata={"help": "Largest document POST /translate_file takes, in bytes (413 above)."}
    )
    file_store_bytes: int = field(
        default=200 << 20,
        metadata={"help": "Memory for translated files not yet fetched; over it the oldest go first."},
    )
    file_minutes: float = field(
        default=30.0, metadata={"help": "Minutes a translated file stays to be fetched from /download_file."}
    )
    queue_size: int = field(
        default=64, metadata={"help": "Requests waiting or decoding at once; more get 503 + Retry-After."}
    )
    strict: bool = field(
        default=False, metadata={"help": "Refuse over-long lines (413) instead of truncating them with a warning."}
    )
    access_log: bool = field(default=False, metadata={"help": "Log every request on stderr."})
    body_timeout: float = field(
        default=10.0,
        metadata={  # 1 MiB arrives in 10 s at ~100 KB/s
            "help": "Seconds a request body may take to arrive, from the end of its headers (408 after)."
        },
    )
    grace_seconds: float = field(
        default=5.0,
        metadata={"help": "After SIGTERM, seconds a body still arriving may take before the connection is closed."},
    )
    api_keys: str | None = field(
        default=None,
        metadata={
            "help": "File of API keys, one per line, each optionally followed by its requests per minute (KEY 60): "
            "translate and detect then need a key (403 without, 429 over its limit)."
        },
    )
    drain_seconds: float = field(
        default=0.0,
        metadata={
            "help": "After SIGTERM, seconds GET /ready answers 503 while requests are still served, so a load "
            "balancer stops sending before the server stops listening."
        },
    )
    state: str | None = field(
        default=None,
        metadata={
            "help": "Where state is kept: an SQLite file for one server (DeepL's glossaries, usage and documents; "
            "default ~/.local/state/mtkit/state.sqlite3, or under $XDG_STATE_HOME), or redis://HOST:PORT/DB, a "
            "store every replica shares (those, keys' limits and translated files; default: this process's memory)."
        },
    )
    character_limits: str | None = field(
        default=None,
        metadata={
            "help": "File of KEY CHARACTERS lines: the characters each key may have translated through DeepL's "
            "API (its character_limit; 456 past it)."
        },
    )

    def __post_init__(self) -> None:
        check(self.workers is None or self.workers >= 1, "--workers must be at least 1")
        for name in ("max_lines", "max_bytes", "max_beam", "queue_size", "max_file_bytes", "file_store_bytes"):
            check(getattr(self, name) >= 1, f"--{name.replace('_', '-')} must be at least 1")
        check(self.max_batch_tokens is None or self.max_batch_tokens >= 1, "--max-batch-tokens must be at least 1")
        check(self.max_delay_ms >= 0, "--max-delay-ms must be >= 0")
        check(self.body_timeout > 0, "--body-timeout must be > 0")
        check(self.file_minutes > 0, "--file-minutes must be > 0")
        check(self.grace_seconds >= 0, "--grace-seconds must be >= 0")
        check(self.drain_seconds >= 0, "--drain-seconds must be >= 0")
        check(0 <= self.port <= 65535, f"--port {self.port}: not a TCP port")
