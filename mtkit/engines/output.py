"""Hypotheses as the lines `mtkit translate` writes: the best text as one line, `--scores`, n-best rows; for any
engine (the hypotheses' token ids decoded by the run's tokenizer). Imports no torch."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mtkit.search.config import Hypothesis

if TYPE_CHECKING:
    from mtkit.tokenizer import Tokenizer


def output_line(text: str) -> str:
    """A decoded text as one output line: byte-fallback pieces can decode to "\n" or "\r", which would split it."""
    return text.replace("\r", " ").replace("\n", " ")


def decode(tokenizer: Tokenizer, ids: list[list[int]]) -> list[str]:
    """Texts of `ids` in one call (a call per line cost 0.1 s per 1,000 lines, 2% of a CTranslate2 run of the demo
    model on a 2-core Zen 4, 2026-11-25); none without asking the tokenizer."""
    return tokenizer.decode(ids) if ids else []


def best_lines(tokenizer: Tokenizer, hypotheses: list[list[Hypothesis]]) -> list[str]:
    """Each input's best hypothesis as one output line; "" for an input without one (an empty line)."""
    texts = iter(decode(tokenizer, [hyps[0].tokens for hyps in hypotheses if hyps]))
    return [output_line(next(texts)) if hyps else "" for hyps in hypotheses]


def scored_rows(tokenizer: Tokenizer, hypotheses: list[list[Hypothesis]]) -> list[list[tuple[str, float]]]:
    """(text as one line, score) of each hypothesis of each input, best first; [] for an input without any."""
    texts = iter(decode(tokenizer, [h.tokens for hyps in hypotheses for h in hyps]))
    return [[(output_line(next(texts)), h.score) for h in hyps] for hyps in hypotheses]


def scored_texts(tokenizer: Tokenizer, hyps: list[Hypothesis]) -> list[tuple[str, float]]:
    """scored_rows of one input."""
    return scored_rows(tokenizer, [hyps])[0]


def confidence(hypothesis: Hypothesis) -> float:
    """Mean log-prob per token of a hypothesis, eos counted (mtkit.text.sentence_plan.Sentence.confidence)."""
    return hypothesis.logprob / (len(hypothesis.tokens) + 1)


def format_output(
    rows: list[tuple[str, float]], index: int, nbest: int, with_scores: bool, confidence: float = 0.0
) -> list[str]:
    """One line per input (nbest 1; with scores `SCORE<TAB>CONFIDENCE<TAB>TEXT`), or `INDEX<TAB>RANK<TAB>SCORE<TAB>TEXT`
    lines for each of the n best, from the input's scored_rows."""
    rows = rows or [("", 0.0)]
    if nbest == 1:
        return [f"{rows[0][1]:.4f}\t{confidence:.4f}\t{rows[0][0]}" if with_scores else rows[0][0]]
    rows = rows + [("", -math.inf)] * (nbest - len(rows))
    return [f"{index}\t{rank}\t{score:.4f}\t{text}" for rank, (text, score) in enumerate(rows[:nbest])]
