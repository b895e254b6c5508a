"""The "replace" way on a real model (tests/data/run-0681275, a small model that translates badly), on both engines:
the model's cross-attention read out beside its forward path (rows of weights that sum to 1, the same every call),
each engine's attention of an output over its source, and `mtkit translate --glossary --term-method replace`, whose
target takes the place of the model's own word, never after the full stop."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from mtkit.engines.config import EngineConfig
from mtkit.engines.factory import load_translator
from mtkit.engines.plans import word_alignment
from mtkit.engines.torch_engine import ends_sentence, pad_batch
from mtkit.model.alignment import cross_attention_weights
from mtkit.search.config import SearchOverrides
from tests.conftest import run_mtkit_in_process
from tests.engines.test_protected_lines import old_run  # noqa: F401  (the fixture)

LINES = ["A dog runs through the grass.", "A dog sleeps.", "Two men are playing football on a green field."]


def test_the_cross_attention_rows_sum_to_one_over_the_source_and_repeat(old_run: Path) -> None:  # noqa: F811
    translator = load_translator(old_run)
    ids = translator.encode_lines(LINES)
    outputs = [hyps[0].tokens for hyps in translator.search_ids(ids)]
    c = translator.model_cfg
    src, _ = pad_batch(ids, c.pad_id, c.eos_id, translator.device)
    tgt_in = torch.full((len(outputs), max(map(len, outputs)) + 1), c.pad_id, dtype=torch.long)
    for row, tokens in enumerate(outputs):
        tgt_in[row, : len(tokens) + 1] = torch.tensor([c.start_id, *tokens])
    model = translator.decoder.models[0]
    weights = cross_attention_weights(model, src, tgt_in)
    assert weights.shape == (len(LINES), tgt_in.size(1), src.size(1))
    assert torch.allclose(weights.sum(dim=2), torch.ones(weights.shape[:2]), atol=1e-5)
    for row, source in enumerate(ids):  # padding after the source's eos draws nothing
        assert float(weights[row, :, len(source) + 1 :].abs().sum()) == 0.0
    assert torch.equal(weights, cross_attention_weights(model, src, tgt_in))
    assert [hyps[0].tokens for hyps in translator.search_ids(ids)] == outputs  # the forward path is untouched


@pytest.mark.parametrize("engine", ["torch", "ctranslate2"])
def test_each_engine_gives_a_row_per_output_piece_over_the_source(old_run: Path, engine: str) -> None:  # noqa: F811
    translator = load_translator(old_run, EngineConfig(engine=engine))
    ids = translator.encode_lines(LINES)
    outputs = [hyps[0].tokens for hyps in translator.search_ids(ids)]
    attention = translator.attention_ids(ids, outputs)
    for source, output, rows in zip(ids, outputs, attention):
        assert len(rows) == len(output) and all(len(row) == len(source) for row in rows)
        assert all(0.0 <= sum(row) <= 1.0 + 1e-4 for row in rows)
    assert translator.attention_ids(ids, outputs) == attention


@pytest.mark.parametrize("engine", ["torch", "ctranslate2", "ctranslate2-native"])
def test_the_search_keeps_the_attention_the_alignment_pass_gives(old_run: Path, engine: str) -> None:  # noqa: F811
    """Asked to align, each engine's beam search keeps each hypothesis's attention as it decodes (no second pass),
    the same as the teacher-forced pass over its output gives, and decides nothing differently."""
    name, _, search = engine.partition("-")
    engine_cfg = EngineConfig(engine=name, ct2_search=search or "exact")
    translator = load_translator(old_run, engine_cfg, SearchOverrides(nbest=2))
    ids = translator.encode_lines(LINES)
    plain, kept = translator.search_ids(ids), translator.search_ids(ids, align=True)
    assert [[(h.tokens, h.score, h.logprob) for h in hyps] for hyps in kept] == [
        [(h.tokens, h.score, h.logprob) for h in hyps] for hyps in plain
    ]
    assert all(h.attention is None for hyps in plain for h in hyps)
    for source, hyps in zip(ids, kept):
        for hyp in hyps:
            passed = translator.attention_ids([source], [hyp.tokens])[0]
            assert len(hyp.attention) == len(hyp.tokens) and all(len(row) == len(source) for row in hyp.attention)
            assert torch.allclose(torch.tensor(hyp.attention), torch.tensor(passed), atol=1e-4)


def test_both_engines_align_alike(old_run: Path) -> None:  # noqa: F811
    """CTranslate2's return_attention is its export's alignment layer and heads: exported as the torch engine reads
    the attention (the decoder layer before the last, every head averaged), the replace way aligns alike on both."""
    torch_engine = load_translator(old_run)
    ct2_engine = load_translator(old_run, EngineConfig(engine="ctranslate2"))
    ids = torch_engine.encode_lines(LINES)
    outputs = [hyps[0].tokens for hyps in torch_engine.search_ids(ids)]
    for mine, theirs in zip(torch_engine.attention_ids(ids, outputs), ct2_engine.attention_ids(ids, outputs)):
        assert torch.allclose(torch.tensor(mine), torch.tensor(theirs), atol=1e-4)


@pytest.mark.parametrize("engine", ["torch", "ctranslate2"])
def test_mtkit_translate_replaces_the_models_own_word(old_run: Path, tmp_path: Path, engine: str) -> None:  # noqa: F811
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("dog\tKöter\n", encoding="utf-8")
    args = ("--glossary", glossary, "--term-method", "replace", "--no-guard", "--engine", engine)
    result = run_mtkit_in_process("translate", old_run, *args, stdin="A dog runs through the grass.\nA dog sleeps.\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert all(line.count("Köter") == 1 and "Hund" not in line for line in out), out
    assert not any(re.search(r"[.!?]\s*Köter", line) for line in out), out  # never after the full stop
    assert re.search(r"glossary \(replace\): 2 of 2 terms in the output; sentences by way: replace 2", result.stderr)


class Pieces:
    """A tokenizer's vocabularies as word_alignment reads them (no language codes)."""

    def __init__(self, source: list[str], target: list[str]) -> None:
        self.source, self.target = source, target

    def pieces(self) -> list[str]:
        return self.source

    def target_pieces(self) -> list[str]:
        return self.target

    def language_codes(self) -> list[str]:
        return []

    def language_id(self, code: str) -> int | None:
        return None


def test_pieces_make_words_an_output_words_rows_averaged_a_source_words_columns_summed() -> None:
    tokenizer = Pieces(["\u2581A", "\u2581do", "g", "."], ["\u2581Ein", "\u2581Hu", "nd", "\u2581", "."])
    attention = [  # rows: Ein, Hu, nd, ▁, . ; columns: A, do, g, .
        [0.9, 0.1, 0.0, 0.0],
        [0.0, 0.5, 0.3, 0.0],
        [0.0, 0.3, 0.5, 0.0],
        [0.0, 0.0, 0.0, 1.0],
        [0.0, 0.0, 0.0, 1.0],
    ]
    words = word_alignment(tokenizer, "A dog.", "Ein Hund .", [0, 1, 2, 3], [0, 1, 2, 3, 4], attention)
    assert words is not None and [[round(weight, 6) for weight in row] for row in words] == [
        [0.9, 0.1],
        [0, 0.8],
        [0, 1],
    ]
    assert word_alignment(tokenizer, "A dog .", "Ein Hund .", [0, 1, 2, 3], [0, 1, 2, 3, 4], attention) is None


def test_the_pieces_that_close_a_sentence(old_run: Path) -> None:  # noqa: F811
    translator = load_translator(old_run)
    pieces = translator.tokenizer.target_pieces()
    flags = ends_sentence(translator.tokenizer, translator.model_cfg.target_vocab_size, translator.device)
    closing = {piece for piece, flag in zip(pieces, flags.tolist()) if flag}
    assert "." in closing and all(piece.endswith((".", "!", "?")) for piece in closing)
    assert not flags[len(pieces) :].any()
