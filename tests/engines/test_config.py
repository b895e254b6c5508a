"""mtkit.engines.config: EngineConfig refuses an engine or a CTranslate2 search it has no such name for, as a UserError
naming the option."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mtkit.engines.config import CT2_SEARCHES, ENGINES, EngineConfig
from mtkit.errors import UserError


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"engine": "onnx"}, f"^--engine onnx: choose one of {', '.join(ENGINES)}$"),
        ({"ct2_search": "fast"}, f"^--ct2-search fast: choose one of {', '.join(CT2_SEARCHES)}$"),
        ({"threads": -1}, r"^--threads must be >= 0 \(0: the usable cores\)$"),
    ],
)
def test_bad_values_are_refused_naming_the_option(bad: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        EngineConfig(**bad)


def test_every_name_it_offers_is_accepted() -> None:
    for engine in ENGINES:
        for search in CT2_SEARCHES:
            cfg = EngineConfig(engine=engine, ct2_search=search)
            assert (cfg.engine, cfg.ct2_search) == (engine, search)


def test_every_field_has_a_default_and_help_and_an_ensemble_is_a_tuple_of_paths() -> None:
    """Adding an engine option is one field: the commands read its default and help from it
    (tests/cli/test_options.py)."""
    for f in dataclasses.fields(EngineConfig):
        assert f.default is not dataclasses.MISSING and f.metadata.get("help"), f.name
    assert EngineConfig(ensemble=["a.pt", Path("b.pt")]).ensemble == (Path("a.pt"), Path("b.pt"))
