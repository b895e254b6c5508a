"""`mtkit clean-distilled`: a distilled corpus with its runaway translations replaced by the references or dropped
(mtkit.bulk.distill_clean), registered on the app by mtkit.cli.main. Counts on stdout (JSON with --json)."""

from __future__ import annotations

from pathlib import Path

import typer

from mtkit.bulk.distill_clean import CleanConfig, clean_distilled
from mtkit.cli.command import emit, user_errors
from mtkit.cli.options import option


@user_errors
def clean_distilled_command(
    prefix: Path = typer.Argument(..., help="`mtkit distill`'s --out PREFIX: PREFIX.SRC and PREFIX.TGT."),
    out: Path = typer.Option(..., "--out", "-o", help="OUT: writes OUT.SRC and OUT.TGT, the cleaned corpus."),
    source_lang: str = typer.Option(..., "--source-lang", help="The source side's suffix (PREFIX.en: en)."),
    target_lang: str = typer.Option(..., "--target-lang", help="The target side's suffix (PREFIX.de: de)."),
    references: Path | None = typer.Option(
        None,
        "--references",
        help="REF_PREFIX: the human references of the same sources, line by line (REF_PREFIX.TGT, plain or .gz); "
        "a runaway takes its reference. Without it a runaway pair is dropped.",
    ),
    max_ratio: float = option(CleanConfig, "max_ratio"),
    max_repeats: int = option(CleanConfig, "max_repeats"),
    scores: Path | None = typer.Option(
        None,
        "--scores",
        help="The teacher's scores of its own translations, `mtkit score-pairs TEACHER --source PREFIX.SRC --target "
        "PREFIX.TGT --json` (an ensemble's with --ensemble), for --worst.",
    ),
    worst: float = option(CleanConfig, "worst"),
    as_json: bool = typer.Option(False, "--json", help="The counts as JSON."),
) -> None:
    """Clean a distilled corpus before a student learns from it: a teacher's translation far longer than its source
    or looping (a phrase repeated in a row, or letters inside a word), or with --scores and --worst among those its
    teacher scores lowest, takes the reference instead, or is dropped."""
    cfg = CleanConfig(max_ratio=max_ratio, max_repeats=max_repeats, worst=worst)
    counts = clean_distilled(prefix, (source_lang, target_lang), out, references, cfg, scores)
    action = "replaced by their references" if references is not None else "dropped"
    written = " and ".join(counts["outputs"])  # type: ignore[arg-type]
    text = (
        f"{counts['pairs']} pairs: {counts['long']} too long, {counts['loop']} looping, {counts['stutter']} "
        f"stuttering and {counts['worst']} scored worst {action}; {counts['kept']} written to {written}"
    )
    emit(counts, as_json, text)
