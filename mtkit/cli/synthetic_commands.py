"""`mtkit back-translate` and `mtkit distill`, one family: a model run over a text file into a synthetic parallel
corpus (mtkit.bulk.synthetic), chunk by chunk so a killed run goes on, sharded with --shard. The two share their
options and one body (translate_corpus); registered on the app by mtkit.cli.main. The summary on stdout (JSON with
--json), progress on stderr.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from mtkit.cli.command import emit, shard_note, user_errors
from mtkit.cli.options import (
    BULK_ENGINE,
    GLOSSARY,
    MODEL_HELP,
    PROTECT,
    PROTECT_DEFAULT,
    SHARD,
    TERM_METHOD,
    bulk_engine,
    option,
    translate_options,
)
from mtkit.cli.process import start_up_without_gc
from mtkit.corpus.config import PreprocessConfig
from mtkit.engines.config import EngineConfig
from mtkit.errors import check
from mtkit.search.config import SearchOverrides, TranslateConfig

if TYPE_CHECKING:
    from mtkit.bulk.synthetic import SyntheticCorpusConfig

# Options back-translate and distill share (declared once: typer reads an option's declaration, never changes it).
BULK_CT2_SEARCH = typer.Option(
    "native",
    "--ct2-search",
    help="--engine ctranslate2's search: native (CTranslate2's own, the default for bulk work) or exact "
    "(mtkit's: the lines of `mtkit translate`).",
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


def input_option(what: str) -> Any:
    return typer.Option(..., "--input", "-i", help=f"{what}, one sentence per line (plain or .gz).")


def out_option(translations: str, model: str) -> Any:
    return typer.Option(
        ...,
        "--out",
        "-o",
        help=f"PREFIX: writes PREFIX.TGT ({translations}) and PREFIX.SRC (the input's lines), language codes from "
        f"{model}.",
    )


@user_errors
def back_translate(
    model: Path = typer.Argument(..., help="The reverse model, from the monolingual text's language: " + MODEL_HELP),
    input: Path = input_option("Monolingual text in the model's source language"),
    out: Path = out_option("the translations", "the model"),
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
    glossary: Path | None = GLOSSARY,
    protect: list[str] = PROTECT,
    protect_default: bool = PROTECT_DEFAULT,
    term_method: str | None = TERM_METHOD,
) -> None:
    """Back-translation: translate monolingual text with a reverse model into a synthetic parallel corpus; killed, it
    goes on from the last chunk written, with the same bytes as a run never stopped."""
    from mtkit.bulk.shards import resolve_shard

    terms = text_fields(glossary, protect, protect_default, term_method)  # a bad one before the model load
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
            **terms,
        )
    translate_corpus(cfg, "back-translate", as_json)


@user_errors
def distill(
    teacher: Path = typer.Argument(..., help="The teacher, from the sources' language: " + MODEL_HELP),
    input: Path = input_option("The sources to distill (a training corpus's source side)"),
    out: Path = out_option("the teacher's translations", "the teacher"),
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
    glossary: Path | None = GLOSSARY,
    protect: list[str] = PROTECT,
    protect_default: bool = PROTECT_DEFAULT,
    term_method: str | None = TERM_METHOD,
) -> None:
    """Sequence-level knowledge distillation (Kim and Rush 2016): a teacher, or an ensemble, translates the training
    sources with beam search into the corpus a student trains on; killed, it goes on from the last chunk written."""
    from mtkit.bulk.shards import resolve_shard

    terms = text_fields(glossary, protect, protect_default, term_method)  # a bad one before the model load
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
            **terms,
        )
    translate_corpus(cfg, "distill", as_json)


def text_fields(
    glossary: Path | None, protect: list[str], protect_default: bool, term_method: str | None
) -> dict[str, Any]:
    """SyntheticCorpusConfig's glossary, its file, patterns and term method, read and checked as `mtkit translate`
    reads them (mtkit.cli.options.translate_options). Used only with a glossary or a pattern: the lines go as they
    are otherwise, as before."""
    options = translate_options(SearchOverrides(), glossary, protect, protect_default, term_method)
    return {
        "glossary": options.glossary,
        "glossary_file": glossary,
        "protect": options.protect,
        "term_method": options.term_method,
    }


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
    terms = ""
    if "terms" in summary:  # with a glossary
        applied = f"{summary['terms_applied']} of {summary['terms']}"
        terms = f"\nglossary ({summary['term_method']}): {applied} terms in the lines written"
    emit(
        summary,
        as_json,
        f"{summary['read']} lines read, {summary['written']} written ({summary['empty']} empty) "
        f"into {' and '.join(summary['outputs'])}{resumed}{terms}" + (f"\n{shard_note(summary)}" if cfg.shard else ""),
    )
