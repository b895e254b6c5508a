"""`mtkit score-pairs`: forced scoring of existing sentence pairs by a model (mtkit.bulk.forced), sharded with
--shard; registered on the app by mtkit.cli.main. A line per pair on stdout or --output, the counts on stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import typer

from mtkit.cli.command import shard_note, user_errors
from mtkit.cli.options import MODEL_HELP, OVERWRITE_SHARD, SHARD, option, recipe_option
from mtkit.cli.process import start_up_without_gc
from mtkit.engines.config import EngineConfig
from mtkit.errors import check
from mtkit.search.config import SearchOverrides, TranslateConfig


@user_errors
def score_pairs(
    model: Path = typer.Argument(..., help=MODEL_HELP),
    source: Path = typer.Option(..., "--source", help="Source sentences, one per line (plain or .gz)."),
    target: Path = typer.Option(..., "--target", help="Their targets, line-aligned with --source."),
    ensemble: list[Path] = typer.Option(
        [],
        "--ensemble",
        help="More models, ensembled with MODEL: each piece scored as the ensemble's search scores it "
        "(--ensemble-mode; --engine torch).",
    ),
    ensemble_mode: str = option(EngineConfig, "ensemble_mode"),
    engine: str = option(EngineConfig, "engine"),
    device: str = option(EngineConfig, "device"),
    dtype: str = option(EngineConfig, "dtype"),
    batch_tokens: int | None = recipe_option(TranslateConfig, "batch_tokens"),
    target_lang: str | None = recipe_option(TranslateConfig, "target_lang"),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per pair: score, tokens, mean."),
    piece_scores: bool = typer.Option(False, "--piece-scores", help="With --json: every piece's log-probability too."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the lines here (default stdout)."),
    shard: str | None = SHARD,
    overwrite: bool = OVERWRITE_SHARD,
) -> None:
    """Forced scoring: the log-probability the model gives each target given its source (natural log, summed over
    the target's pieces and its end of sentence), one line per pair in input order; "nan" (or a JSON "error") for
    a pair with an empty side or a side longer than the model takes. `mtkit score` is the metric command."""
    from mtkit.bulk.shards import resolve_shard
    from mtkit.console import log

    check(source.is_file(), f"{source}: no such file")
    check(target.is_file(), f"{target}: no such file")
    check(output is not None or shard is None, f"--shard {shard}: give --output (each shard writes its own file)")
    spec = resolve_shard(shard, os.environ) if output is not None else None
    with start_up_without_gc():
        from mtkit.bulk.forced import CHUNK_PAIRS, score_pair_files, score_pair_shard
        from mtkit.engines.factory import load_translator

        engine_cfg = EngineConfig(engine, device, dtype, ensemble=ensemble, ensemble_mode=ensemble_mode)
        search = SearchOverrides(batch_tokens=batch_tokens, target_lang=target_lang)
        translator = load_translator(model, engine_cfg, search)
    if spec is not None:
        options = {"engine": engine, "as_json": as_json, "piece_scores": piece_scores}
        if ensemble:  # only with one: a shard begun before ensembles were scored still resumes
            options["ensemble"] = [str(path) for path in ensemble]
            options["ensemble_mode"] = ensemble_mode
        counts = score_pair_shard(
            translator, source, target, output, spec, options, as_json, piece_scores, CHUNK_PAIRS, overwrite
        )  # type: ignore[arg-type]
    else:
        with contextlib.ExitStack() as files:
            out = files.enter_context(open(output, "w", encoding="utf-8")) if output is not None else sys.stdout
            counts = score_pair_files(translator, source, target, out, as_json, piece_scores, CHUNK_PAIRS)
    log(f"{counts['pairs']} pairs: {counts['scored']} scored, {counts['unscored']} without a score")
    if spec is not None:
        log(shard_note(counts))
