"""`mtkit filter-pairs`: dual conditional cross-entropy filtering of a corpus by a forward and a backward model
(mtkit.bulk.xent_filter), sharded with --shard; registered on the app by mtkit.cli.main. The summary on stdout (JSON
with --json), progress on stderr.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from mtkit.cli.command import shard_note, user_errors
from mtkit.cli.options import BULK_ENGINE, MODEL_HELP, SHARD, bulk_engine, option
from mtkit.cli.process import start_up_without_gc
from mtkit.engines.config import EngineConfig
from mtkit.errors import check
from mtkit.search.config import SearchOverrides


@user_errors
def filter_pairs(
    forward: Path = typer.Option(
        ..., "--forward", help="Model from the corpus's source language to its target: " + MODEL_HELP
    ),
    backward: Path = typer.Option(..., "--backward", help="Model from its target language back to its source."),
    source: Path = typer.Option(
        ..., "--source", help="Source side of the corpus, one sentence per line (plain or .gz)."
    ),
    target: Path = typer.Option(..., "--target", help="Target side, line-aligned with --source."),
    out: Path = typer.Option(
        ...,
        "--out",
        help="PREFIX: writes PREFIX.scores.tsv and the kept pairs as PREFIX.SRC and PREFIX.TGT (language codes).",
    ),
    keep: float | None = typer.Option(
        None, "--keep", help="Keep this fraction of the pairs, the best scored (0 to 1)."
    ),
    threshold: float | None = typer.Option(
        None, "--threshold", help="Keep the pairs scoring at least this (scores are 0 to 1)."
    ),
    source_lang: str | None = typer.Option(
        None,
        "--source-lang",
        help="The corpus's source language: the >>xx<< code a multilingual --backward model is asked for.",
    ),
    target_lang: str | None = typer.Option(
        None,
        "--target-lang",
        help="The corpus's target language: the >>xx<< code a multilingual --forward model is asked for.",
    ),
    engine: str | None = BULK_ENGINE,
    device: str = option(EngineConfig, "device"),
    dtype: str = option(EngineConfig, "dtype"),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Start again instead of going on from an unfinished run's scores."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    shard: str | None = SHARD,
) -> None:
    """Dual conditional cross-entropy filtering (Junczys-Dowmunt 2018): score each pair with a forward and a backward
    model, keep the best fraction or those over a threshold. Killed, it goes on from the last chunk scored."""
    from mtkit.bulk.forced import CHUNK_PAIRS
    from mtkit.bulk.shards import resolve_shard
    from mtkit.console import log, progress
    from mtkit.files import count_lines

    check(source.is_file(), f"{source}: no such file")
    check(target.is_file(), f"{target}: no such file")
    spec = resolve_shard(shard, os.environ)
    with start_up_without_gc():
        from mtkit.bulk.xent_filter import check_selection, filter_corpus
        from mtkit.engines.factory import load_translator

        check_selection(keep, threshold)
        engine_cfg = EngineConfig(bulk_engine(engine), device, dtype)
        models = [
            load_translator(model, engine_cfg, SearchOverrides(target_lang=lang or None))
            for model, lang in ((forward, target_lang), (backward, source_lang))
        ]
    total = count_lines(source)
    if spec is not None:
        start, end = spec.line_range(total, CHUNK_PAIRS)
        total = end - start
    with progress() as bar:
        task = bar.add_task("scoring", total=total, info="")
        summary = filter_corpus(
            *models,
            source,
            target,
            out,
            keep,
            threshold,
            overwrite,
            on_chunk=lambda pairs: bar.advance(task, pairs),
            chunk=CHUNK_PAIRS,
            shard=spec,
        )
    if spec is not None:
        log(shard_note(summary))
    if as_json:
        print(json.dumps(summary))
    elif spec is not None and not summary["merged"]:
        print(f"scored {' '.join(summary['files'])}")
    else:
        cutoff = "none" if summary["cutoff"] is None else f"{summary['cutoff']:.4f}"
        print(
            f"kept {summary['kept']} of {summary['pairs']} pairs (lowest score kept {cutoff}); "
            f"{summary['unscored']} without a score; {' '.join(summary['kept_files'])}"
        )
    if summary["resumed_after"]:
        log(f"went on after the {summary['resumed_after']} pairs an earlier run had scored")
