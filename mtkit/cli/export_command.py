"""`mtkit export`: a trained model written for CTranslate2 (mtkit.exports.ctranslate2) or Hugging Face
transformers (mtkit.exports.huggingface); registered on the app by mtkit.cli.main. The summary on stdout (JSON with
--json).
"""

from __future__ import annotations

from pathlib import Path

import typer

from mtkit.cli.command import emit, user_errors
from mtkit.cli.options import MODEL_HELP
from mtkit.errors import check


@user_errors
def export(
    model: Path = typer.Argument(..., help=MODEL_HELP),
    to: str = typer.Option(..., "--to", help="Target format: ctranslate2 or huggingface (MarianMTModel)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output directory (written atomically)."),
    quantization: str | None = typer.Option(
        None, "--quantization", help="ctranslate2: int8, int8_float32, float16 or bfloat16 (default float32)."
    ),
    score_json: Path | None = typer.Option(
        None, "--score", help="huggingface: `mtkit score --json` output to quote in the model card."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Export a trained model to CTranslate2 or Hugging Face transformers, used without mtkit (README beside it)."""
    check(to in ("ctranslate2", "huggingface"), f"--to {to}: supported formats: ctranslate2, huggingface")
    check(to == "ctranslate2" or quantization is None, "--quantization applies to --to ctranslate2 only")
    if to == "huggingface":
        from mtkit.exports.huggingface import export_huggingface

        result = export_huggingface(model, out, score_json)
        made_with = f"transformers {result['transformers']}"
    else:
        from mtkit.exports.ctranslate2 import export_ctranslate2

        result = export_ctranslate2(model, out, quantization)
        made_with = f"CTranslate2 {result['ctranslate2']}, {result['quantization']}"
    emit(
        result,
        as_json,
        f"{result['out']} <- {result['checkpoint']} ({made_with}, {result['bytes'] / 2**20:.1f} MiB); "
        f"see {result['out']}/README.md",
    )
