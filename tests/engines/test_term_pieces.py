"""The reserved term-hint pieces are never searched, by either engine: the torch engine's decoder gives suppressed ids
-inf at every step (beam, greedy, sampling), CTranslate2 is given them as suppress_sequences. Shown on a real model by
suppressing the pieces it wants most; a model without the reserved pieces suppresses nothing, as before."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from mtkit.engines.ct2 import CT2Translator
from mtkit.engines.factory import EXPORT_ON_FIRST_USE
from mtkit.engines.torch_engine import TorchTranslator
from mtkit.search.step import ModelDecoder

LINES = ["A man is sleeping on a bench.", "Two dogs play in the snow.", "A girl in a red shirt."]


def test_model_decoder_never_gives_a_suppressed_id_a_chance() -> None:
    class Logits:
        def decode_hidden(self, tokens: torch.Tensor, state: None) -> torch.Tensor:
            return torch.arange(len(tokens))

        def project(self, hidden: torch.Tensor) -> torch.Tensor:
            logits = torch.zeros(len(hidden), 12)
            logits[:, 7] = 50.0  # what the model wants most
            return logits

    decoder = ModelDecoder([Logits()], suppressed=(7, 9))
    logp = decoder.log_probs(decoder.step(torch.zeros(3, dtype=torch.long), [None]), slice(None))
    assert torch.isinf(logp[:, [7, 9]]).all() and torch.isfinite(logp[:, :7]).all()
    assert ModelDecoder([Logits()]).suppressed == []


def wanted_ids(hypotheses: list) -> set[int]:
    return {token for hyps in hypotheses for token in hyps[0].tokens}


@pytest.mark.parametrize("options", [{"beam": 4, "nbest": 4}, {"beam": 1}, {"sampling": True, "nbest": 3}])
def test_the_torch_engine_suppresses_what_its_decoder_is_told(tiny_run: Path, options: dict) -> None:
    translator = TorchTranslator.load(tiny_run, **options)
    assert translator.decoder.suppressed == []  # trained without term hints: nothing suppressed
    favourite = sorted(wanted_ids(translator.translate_hypotheses(LINES)))[:6]
    translator.decoder.suppressed = favourite
    found = translator.translate_hypotheses(LINES)
    assert all(hyps for hyps in found)
    assert not {token for hyps in found for h in hyps for token in h.tokens} & set(favourite)


def test_ctranslate2_suppresses_its_pieces(tiny_run: Path) -> None:
    pytest.importorskip("ctranslate2")
    translator = CT2Translator.load(tiny_run, exporter=EXPORT_ON_FIRST_USE, device="cpu", beam=4, nbest=4)
    assert translator.suppressed == ()
    favourite = sorted(wanted_ids(translator.translate_hypotheses(LINES)))[:6]
    pieces = tuple(translator.target_pieces[i] for i in favourite)
    found = dataclasses.replace(translator, suppressed=pieces).translate_hypotheses(LINES)
    assert all(hyps for hyps in found)
    assert not {token for hyps in found for h in hyps for token in h.tokens} & set(favourite)


def test_the_guided_search_never_writes_a_suppressed_id_even_as_a_glossary_target(tiny_run: Path) -> None:
    translator = TorchTranslator.load(tiny_run, beam=4, nbest=4)
    favourite = sorted(wanted_ids(translator.translate_hypotheses(LINES)))[:6]
    translator.decoder.suppressed = favourite
    pieces = translator.tokenizer.target_pieces()
    forbidden = "".join(pieces[i] for i in favourite[:2]).replace("▁", " ").strip()  # a target made of them
    allowed = translator.tokenizer.decode([[i for i in range(5, 400) if i not in favourite][:1]])[0]
    found = translator.translate_hypotheses(LINES, terms=[(forbidden, allowed)] * len(LINES))
    assert all(hyps for hyps in found)  # a target the search may not write is left out, not a dead search
    assert not {token for hyps in found for h in hyps for token in h.tokens} & set(favourite)
