"""The one rich Console (on stderr) and small progress/log helpers.

Results go to stdout through the CLI only; everything here writes to stderr.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True, highlight=False, soft_wrap=True)


def log(message: str) -> None:
    """Print one status line on stderr."""
    console.print(message, markup=False)


def warn(message: str) -> None:
    """Print one warning line on stderr."""
    console.print(f"warning: {message}", style="yellow", markup=False)


def interactive() -> bool:
    """True when stderr is a terminal (progress bars only make sense there)."""
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


def progress(quiet: bool = False) -> Progress:
    """A rich progress display on stderr, disabled when quiet or not a terminal."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
        console=console,
        disable=quiet or not interactive(),
        transient=False,
    )
