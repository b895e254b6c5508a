"""mtkit.serve.config: serve's defaults (those the README documents), its one-line refusals, and CLI_DEFAULTS
taken from TranslateConfig."""

from __future__ import annotations

import dataclasses

import pytest

from mtkit.engines.config import EngineConfig
from mtkit.errors import UserError
from mtkit.search.config import TranslateConfig
from mtkit.serve.config import CLI_DEFAULTS, ServeConfig


def test_the_documented_defaults() -> None:
    assert dataclasses.asdict(ServeConfig()) == {
        "host": "127.0.0.1",
        "port": 8080,
        "engine": dataclasses.asdict(EngineConfig()),  # the engine's defaults, as `mtkit translate`'s
        "workers": None,
        "max_batch_tokens": None,
        "max_delay_ms": 5.0,
        "max_lines": 1000,
        "max_bytes": 1 << 20,
        "max_beam": 16,
        "max_file_bytes": 20 << 20,
        "file_store_bytes": 200 << 20,
        "file_minutes": 30.0,
        "queue_size": 64,
        "strict": False,
        "access_log": False,
        "body_timeout": 10.0,
        "grace_seconds": 5.0,
        "api_keys": None,
        "state": None,
        "character_limits": None,
        "drain_seconds": 0.0,
    }


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"port": 70000}, "--port 70000"),
        ({"workers": 0}, "--workers"),
        ({"max_lines": 0}, "--max-lines"),
        ({"max_batch_tokens": 0}, "--max-batch-tokens"),
        ({"drain_seconds": -1}, "--drain-seconds"),
        ({"max_delay_ms": -1.0}, "--max-delay-ms"),
        ({"body_timeout": 0.0}, "--body-timeout"),
        ({"grace_seconds": -1.0}, "--grace-seconds"),
    ],
)
def test_bad_values_are_one_line_user_errors(bad: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        ServeConfig(**bad)


def test_cli_defaults_are_translate_config_defaults() -> None:
    defaults = TranslateConfig()
    assert CLI_DEFAULTS == {
        name: getattr(defaults, name) for name in ("nbest", "sampling", "top_k", "top_p", "temperature")
    }


def test_every_field_has_help() -> None:
    assert all(f.metadata.get("help") for f in dataclasses.fields(ServeConfig))
