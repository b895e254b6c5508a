"""mtkit.engines.config: EngineConfig refuses an engine or a CTranslate2 search it has no such name for, as a UserError
naming the option."""

from __future__ import annotations

import pytest

from mtkit.engines.config import CT2_SEARCHES, ENGINES, EngineConfig
from mtkit.errors import UserError


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"engine": "onnx"}, f"^--engine onnx: choose one of {', '.join(ENGINES)}$"),
        ({"ct2_search": "fast"}, f"^--ct2-search fast: choose one of {', '.join(CT2_SEARCHES)}$"),
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
