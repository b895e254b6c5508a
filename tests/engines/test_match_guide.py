"""The torch engine hands a fuzzy-repair model's match to the search (mtkit.search.matches): the tokens after the
model's ｟fuzzy｠ piece guide the line that holds it, and a line without one translates as it does without a guide.
The tiny run has no such piece: one of its own pieces stands in for it."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from mtkit.engines import torch_engine
from mtkit.engines.torch_engine import TorchTranslator
from mtkit.search.matches import MatchGuide

STAND_IN = "▁Z"  # a piece of the tiny run's vocabulary that none of the lines below holds


def test_the_match_after_the_piece_guides_its_line_only(tiny_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = TorchTranslator.load(tiny_run, beam=4)
    assert plain._fuzzy is None  # trained without the piece: no guide
    lines = ["A dog runs through the grass.", "Two men are sitting on a bench."]
    before = plain.translate(lines)
    if STAND_IN not in plain.tokenizer.pieces():
        pytest.skip(f"the tiny run's vocabulary lacks {STAND_IN!r}")
    monkeypatch.setattr(torch_engine, "fuzzy_piece", lambda tokenizer: STAND_IN)
    strong = functools.partial(MatchGuide, word_bonus=5.0, order_bonus=10.0)
    monkeypatch.setattr(torch_engine, "MatchGuide", strong)
    guided = TorchTranslator.load(tiny_run, beam=4)
    match = "Ein Hund rennt durch das Gras."
    assert guided._fuzzy is not None
    out = guided.translate([f"{lines[0]} Z {match}", lines[1]])
    assert out[0] == match != before[0]
    assert out[1] == before[1]
