"""The `mtkit` commands that run a trained model over data: forced scoring, cross-entropy filtering,
back-translation and distillation, each sharded with --shard (mtkit.bulk.shards), and merge-shards. One short
function each, registered on the app by mtkit.cli.main (which lists them in `mtkit --help`); results on stdout, as
every command's.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from mtkit.cli.command import emit, shard_note, user_errors
from mtkit.cli.options import OVERWRITE_SHARD, SHARD, option, recipe_option
from mtkit.cli.process import start_up_without_gc
from mtkit.corpus.config import PreprocessConfig
from mtkit.engines.config import EngineConfig
from mtkit.errors import check
from mtkit.search.config import SearchOverrides, TranslateConfig

if TYPE_CHECKING:
    from mtkit.bulk.synthetic import SyntheticCorpusConfig

MODEL_HELP = "RUN_DIR (uses its averaged model) or a checkpoint file."
# Options back-translate and distill share (declared once: typer reads an option's declaration, never changes it).
BULK_CT2_SEARCH = typer.Option(
    "native",
    "--ct2-search",
    help="--engine ctranslate2's search: native (CTranslate2's own, the default for bulk work) or exact "
    "(mtkit's: the lines of `mtkit translate`).",
)
BULK_ENGINE = typer.Option(
    None,
    "--engine",
    help="ctranslate2 (the default for bulk work) or torch (the default, and the only engine, for distill's "
    "--ensemble).",
)
CHUNK_LINES = typer.Option(
    10_000,
    "--chunk-lines",
    help="Lines translated and recorded together: a killed run goes on from the last whole chunk.",
)
BEAM_LENGTH_PENALTY = typer.Option(
    None, "--length-penalty", help="Beam search's length penalty (default: the recipe's translate.length_penalty)."
)
OVERWRITE_CORPUS = typer.Option(
    False, "--overwrite", help="Start again instead of going on from an unfinished run, or replace finished outputs."
)


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


@user_errors
def back_translate(
    model: Path = typer.Argument(..., help="The reverse model, from the monolingual text's language: " + MODEL_HELP),
    input: Path = typer.Option(
        ...,
        "--input",
        "-i",
        help="Monolingual text in the model's source language, one sentence per line (plain or .gz).",
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        "-o",
        help="PREFIX: writes PREFIX.TGT (the translations) and PREFIX.SRC (the input's lines), "
        "language codes from the model.",
    ),
    engine: str | None = BULK_ENGINE,
    ct2_search: str = BULK_CT2_SEARCH,
    target_lang: str | None = typer.Option(
        None, "--target-lang", help="A multilingual reverse model's target language (its >>xx<< code)."
    ),
    beam: int | None = typer.Option(None, "--beam", help="Beam search with this beam instead of sampling."),
    length_penalty: float | None = BEAM_LENGTH_PENALTY,
    sampling: bool = typer.Option(
        False, "--sampling", help="Sample each translation (the default; Edunov et al. 2018)."
    ),
    top_k: int = option(TranslateConfig, "top_k"),
    top_p: float = option(TranslateConfig, "top_p"),
    temperature: float = option(TranslateConfig, "temperature"),
    seed: int = option(TranslateConfig, "seed"),
    chunk_lines: int = CHUNK_LINES,
    device: str = option(EngineConfig, "device"),
    dtype: str = option(EngineConfig, "dtype"),
    on_bad_utf8: str = option(PreprocessConfig, "on_bad_utf8"),
    overwrite: bool = OVERWRITE_CORPUS,
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    shard: str | None = SHARD,
) -> None:
    """Back-translation: translate monolingual text with a reverse model into a synthetic parallel corpus; killed, it
    goes on from the last chunk written, with the same bytes as a run never stopped."""
    from mtkit.bulk.shards import resolve_shard

    with start_up_without_gc():
        from mtkit.bulk.synthetic import SyntheticCorpusConfig

        cfg = SyntheticCorpusConfig(
            model,
            input,
            out,
            chunk_lines,
            EngineConfig(bulk_engine(engine), device, dtype, ct2_search=ct2_search),
            SearchOverrides(
                beam=beam,
                length_penalty=length_penalty,
                sampling=sampling,
                top_k=top_k,
                top_p=top_p,
                temperature=temperature,
                seed=seed,
                target_lang=target_lang,
            ),
            on_bad_utf8=on_bad_utf8,
            overwrite=overwrite,
            shard=resolve_shard(shard, os.environ),
        )
    translate_corpus(cfg, "back-translate", as_json)


@user_errors
def distill(
    teacher: Path = typer.Argument(..., help="The teacher, from the sources' language: " + MODEL_HELP),
    input: Path = typer.Option(
        ...,
        "--input",
        "-i",
        help="The sources to distill (a training corpus's source side), one sentence per line (plain or .gz).",
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        "-o",
        help="PREFIX: writes PREFIX.TGT (the teacher's translations) and PREFIX.SRC (the input's lines), "
        "language codes from the teacher.",
    ),
    ensemble: list[Path] = typer.Option(
        [],
        "--ensemble",
        help="More teachers, ensembled with TEACHER at each step (--ensemble-mode; --engine torch).",
    ),
    ensemble_mode: str = option(EngineConfig, "ensemble_mode"),
    beam: int | None = typer.Option(None, "--beam", help="The teacher's beam (default: its recipe's translate.beam)."),
    length_penalty: float | None = BEAM_LENGTH_PENALTY,
    engine: str | None = BULK_ENGINE,
    ct2_search: str = BULK_CT2_SEARCH,
    target_lang: str | None = typer.Option(
        None, "--target-lang", help="A multilingual teacher's target language (its >>xx<< code)."
    ),
    chunk_lines: int = CHUNK_LINES,
    device: str = option(EngineConfig, "device"),
    dtype: str = option(EngineConfig, "dtype"),
    on_bad_utf8: str = option(PreprocessConfig, "on_bad_utf8"),
    overwrite: bool = OVERWRITE_CORPUS,
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    shard: str | None = SHARD,
) -> None:
    """Sequence-level knowledge distillation (Kim and Rush 2016): a teacher, or an ensemble, translates the training
    sources with beam search into the corpus a student trains on; killed, it goes on from the last chunk written."""
    from mtkit.bulk.shards import resolve_shard

    with start_up_without_gc():
        from mtkit.bulk.synthetic import SyntheticCorpusConfig

        cfg = SyntheticCorpusConfig(
            teacher,
            input,
            out,
            chunk_lines,
            EngineConfig(
                bulk_engine(engine, ensemble),
                device,
                dtype,
                ct2_search=ct2_search,
                ensemble=ensemble,
                ensemble_mode=ensemble_mode,
            ),
            SearchOverrides(beam=beam, length_penalty=length_penalty, target_lang=target_lang),
            on_bad_utf8=on_bad_utf8,
            overwrite=overwrite,
            beam_by_default=True,
            shard=resolve_shard(shard, os.environ),
        )
    translate_corpus(cfg, "distill", as_json)


def bulk_engine(engine: str | None, ensemble: list[Path] | None = None) -> str:
    """--engine of the bulk commands (BULK_ENGINE): as given, else torch for an ensemble and ctranslate2 otherwise."""
    return engine or ("torch" if ensemble else "ctranslate2")


def translate_corpus(cfg: SyntheticCorpusConfig, what: str, as_json: bool) -> None:
    """Run cfg's model over its input with progress on stderr, then print the summary."""
    from mtkit.bulk.synthetic import write_synthetic_corpus
    from mtkit.console import progress
    from mtkit.files import count_lines

    check(cfg.input.is_file(), f"{cfg.input}: no such file")
    total = count_lines(cfg.input)
    if cfg.shard is not None:
        start, end = cfg.shard.line_range(total, cfg.chunk_lines)
        total = end - start
    with progress() as bar:
        task = bar.add_task(what, total=total, info="")
        summary = write_synthetic_corpus(cfg, on_chunk=lambda lines: bar.advance(task, lines))
    resumed = f"; went on after line {summary['resumed_from']}" if summary["resumed_from"] else ""
    emit(
        summary,
        as_json,
        f"{summary['read']} lines read, {summary['written']} written ({summary['empty']} empty) "
        f"into {' and '.join(summary['outputs'])}{resumed}" + (f"\n{shard_note(summary)}" if cfg.shard else ""),
    )


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
