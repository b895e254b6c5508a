"""`mtkit merge-shards`: a complete set of shards merged into the files one process writes (mtkit.bulk.shard_sets),
and filter-pairs' selection made once its scores are; registered on the app by mtkit.cli.main. The summary on stdout
(JSON with --json).
"""

from __future__ import annotations

from pathlib import Path

import typer

from mtkit.cli.command import emit, user_errors


@user_errors
def merge_shards(
    name: Path = typer.Argument(
        ...,
        help="What the sharded command wrote: translate's or score-pairs' --output, back-translate's, distill's or "
        "filter-pairs' --out PREFIX.",
    ),
    keep_shards: bool = typer.Option(
        False, "--keep-shards", help="Keep the shards' files and records (by default removed once merged)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Merge a complete set of shards (--shard K/N) into the files one process writes, as the shard that completes a
    set does; a set with a shard missing, unfinished or made otherwise than the others is refused, naming it."""
    from mtkit.bulk.shard_sets import merge_set

    merged = merge_set(name, keep_shards)
    record = merged.pop("record")
    summary = {**merged, "shards": record["shards"], "lines": record["total"]}
    if record["command"] == "filter-pairs":  # the selection needs every score: made once they are merged
        from mtkit.bulk.xent_filter import select_merged

        summary |= select_merged(name, record["extra"])
    text = f"{' and '.join(merged['merged'])} <- {record['shards']} shards, {record['total']} lines"
    if "kept_files" in summary:
        text += f"; kept {summary['kept']} of {summary['pairs']} pairs: {' '.join(summary['kept_files'])}"
    emit(summary, as_json, text)
