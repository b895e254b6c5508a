"""`mtkit import`: a Hugging Face Marian model (an opus-mt model) as an mtkit run directory
(mtkit.exports.huggingface); registered on the app by mtkit.cli.main. The summary on stdout (JSON with --json).
"""

from __future__ import annotations

from pathlib import Path

import typer

from mtkit.cli.command import emit, user_errors


@user_errors
def import_model(
    source: Path = typer.Argument(
        ..., help="A local Hugging Face MarianMTModel directory (e.g. a downloaded opus-mt model)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="RUN_DIR to create (written atomically)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Import a Marian model as a run directory that translate, serve, export and train --init-from use."""
    import dataclasses

    from mtkit.exports.huggingface import import_huggingface
    from mtkit.training.config import TrainConfig

    result = import_huggingface(source, out, dataclasses.asdict(TrainConfig()))
    emit(
        result,
        as_json,
        f"{result['out']} <- {result['source']}; fine-tune with -c {result['out']}/recipe.toml "
        f"--init-from {result['out']} (docs/huggingface.md)",
    )
