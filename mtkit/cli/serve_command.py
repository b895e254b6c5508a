"""`mtkit serve`: the options of mtkit.serve.config.ServeConfig (and of its EngineConfig) read from the command line
and the models served over HTTP (mtkit.serve.server, imported when serving); registered on the app by mtkit.cli.main.
"""

from __future__ import annotations

from pathlib import Path

import typer

from mtkit.cli.command import user_errors
from mtkit.cli.options import option, values_of
from mtkit.engines.config import EngineConfig
from mtkit.serve.config import ServeConfig


@user_errors
def serve(
    ctx: typer.Context,
    models: list[Path] = typer.Argument(
        ...,
        help="One or more RUN_DIRs or checkpoints, each serving its language "
        "pair (a text file here lists them, one per line). Clients see each model by its directory's name, "
        "or by NAME given as NAME=RUN_DIR.",
    ),
    host: str = option(ServeConfig, "host"),
    port: int = option(ServeConfig, "port"),
    device: str = option(EngineConfig, "device"),
    dtype: str = option(EngineConfig, "dtype"),
    max_batch_tokens: int | None = option(ServeConfig, "max_batch_tokens"),
    max_delay_ms: float = option(ServeConfig, "max_delay_ms"),
    max_lines: int = option(ServeConfig, "max_lines"),
    max_bytes: int = option(ServeConfig, "max_bytes"),
    max_beam: int = option(ServeConfig, "max_beam"),
    max_file_bytes: int = option(ServeConfig, "max_file_bytes"),
    file_store_bytes: int = option(ServeConfig, "file_store_bytes"),
    file_minutes: float = option(ServeConfig, "file_minutes"),
    queue_size: int = option(ServeConfig, "queue_size"),
    strict: bool = option(ServeConfig, "strict"),
    access_log: bool = option(ServeConfig, "access_log"),
    body_timeout: float = option(ServeConfig, "body_timeout"),
    grace_seconds: float = option(ServeConfig, "grace_seconds"),
    engine: str = option(EngineConfig, "engine"),
    ct2_search: str = option(EngineConfig, "ct2_search"),
    shortlist: bool = option(EngineConfig, "shortlist"),
    workers: int | None = option(ServeConfig, "workers"),
    threads: int = option(EngineConfig, "threads"),
    api_keys: str | None = option(ServeConfig, "api_keys"),
    drain_seconds: float = option(ServeConfig, "drain_seconds"),
    state: str | None = option(ServeConfig, "state"),
    character_limits: str | None = option(ServeConfig, "character_limits"),
) -> None:
    """Serve translations over HTTP: mtkit's API, LibreTranslate's and DeepL's (docs/serving.md)."""
    from mtkit.serve.server import serve as run_serve

    engine_cfg = EngineConfig(**values_of(EngineConfig, ctx.params))
    run_serve(models, ServeConfig(**{**values_of(ServeConfig, ctx.params), "engine": engine_cfg}))
