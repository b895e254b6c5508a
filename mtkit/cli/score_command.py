"""`mtkit score`: BLEU, chrF and TER of a hypothesis file against its references (mtkit.score); registered on the
app by mtkit.cli.main. The scores and sacrebleu's signature on stdout (JSON with --json).
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from mtkit.cli.command import emit, user_errors
from mtkit.score import TOKENIZE


@user_errors
def score(
    hyp: Path | None = typer.Argument(None, help="Hypothesis file (default stdin)."),
    ref: list[Path] = typer.Option(..., "--ref", "-r", help="Reference file (repeatable)."),
    tokenize: str = typer.Option(TOKENIZE, "--tokenize", help="sacrebleu tokenizer: 13a, intl, zh, ja-mecab, none..."),
    legacy: bool = typer.Option(False, "--legacy", help="Also print paper-style tokenized, compound-split BLEU."),
    lc_tok: bool = typer.Option(
        False,
        "--lc-tok",
        help="Also print the Multi30k literature's BLEU: lower-cased, "
        "punctuation-normalised, Moses-tokenized (docs/translating.md; needs '.[moses]').",
    ),
    lc_tok_lang: str | None = typer.Option(
        None,
        "--lc-tok-lang",
        help="Language for --lc-tok's Moses scripts (default: the first --ref's suffix, e.g. de).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print {bleu, chrf, ter, signature, ...} as JSON."),
) -> None:
    """BLEU, chrF and TER through sacrebleu, with sacrebleu's signature."""
    from mtkit.files import read_lines, read_stream_lines
    from mtkit.score import score_files

    hyps = list(read_lines(hyp, "replace")) if hyp is not None else list(read_stream_lines(sys.stdin.buffer))
    result = score_files(
        hyps, str(hyp or "<stdin>"), list(ref), tokenize=tokenize, legacy=legacy, lc_tok=lc_tok, lc_tok_lang=lc_tok_lang
    )
    text = f"{result.bleu_detail}\nsignature: {result.signature}\nchrF2 = {result.chrf}\nTER = {result.ter}"
    if result.legacy_bleu is not None:
        text += f"\nlegacy tokenized BLEU (13a tokens, compound-split; compare with the paper) = {result.legacy_bleu}"
    if result.lc_tok_bleu is not None:
        text += f"\nlower-cased, normalised, Moses-tokenized BLEU (the Multi30k literature's) = {result.lc_tok_bleu}"
    emit(result.as_dict(), as_json, text)
