"""`mtkit average`: the last K checkpoints of a run averaged into one model (mtkit.runs.checkpoint); registered on
the app by mtkit.cli.main. The file written and its checkpoints on stdout (JSON with --json).
"""

from __future__ import annotations

from pathlib import Path

import typer

from mtkit.cli.command import emit, user_errors


@user_errors
def average(
    run_dir: Path = typer.Argument(..., help="RUN_DIR of `mtkit train`."),
    last: int = typer.Option(5, "--last", "-k", help="Average the last K checkpoints."),
    out: Path | None = typer.Option(None, "--out", help="Output file (default RUN_DIR/average.pt)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Average the parameters of the last K checkpoints (float32), as the paper does."""
    from mtkit.runs.checkpoint import write_average

    target, used = write_average(run_dir, last, out)
    emit({"out": str(target), "checkpoints": [str(p) for p in used]}, as_json, f"{target} <- {len(used)} checkpoints")
