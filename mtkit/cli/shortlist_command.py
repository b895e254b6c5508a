"""`mtkit shortlist`: a run's lexical shortlist counted from its training data (mtkit.corpus.shortlist), registered
on the app by mtkit.cli.main. The record on stdout (JSON with --json); CTranslate2 searches it with --shortlist.
"""

from __future__ import annotations

from pathlib import Path

import typer

from mtkit.cli.command import emit, user_errors
from mtkit.cli.options import option
from mtkit.corpus.shortlist import ShortlistConfig, make_shortlist
from mtkit.errors import check
from mtkit.file_names import SHORTLIST_NAME


@user_errors
def shortlist(
    run_dir: Path = typer.Argument(..., help="The run directory the shortlist is for (written into it)."),
    data_dir: Path = typer.Argument(..., help="A preprocessed directory tokenized with the run's model: its data."),
    frequent: int = option(ShortlistConfig, "frequent"),
    best: int = option(ShortlistConfig, "best"),
    max_pairs: int = option(ShortlistConfig, "max_pairs"),
    as_json: bool = typer.Option(False, "--json", help="The shortlist's record as JSON."),
) -> None:
    """Count which target pieces go with each source piece in the run's training data and write RUN_DIR/shortlist.txt:
    `translate`/`serve --engine ctranslate2 --shortlist` then search only those (and exports carry it)."""
    check(run_dir.is_dir(), f"{run_dir}: no such run directory")
    cfg = ShortlistConfig(frequent=frequent, best=best, max_pairs=max_pairs)
    info = make_shortlist(run_dir, data_dir, cfg)
    text = (
        f"{run_dir / SHORTLIST_NAME}: {info['frequent']} frequent target pieces and up to {info['best']} per source "
        f"piece, for {info['source_pieces']} source pieces, from {info['pairs_counted']} sentence pairs"
    )
    emit(info, as_json, text)
