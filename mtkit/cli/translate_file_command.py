"""`mtkit translate-file`: documents translated into files of their own format (mtkit.bulk.document_translation),
registered on the app by mtkit.cli.main. A summary on stdout (JSON with --json), progress and the guard on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from mtkit.cli.command import emit, user_errors
from mtkit.cli.options import (
    GLOSSARY,
    MEMORY,
    MEMORY_STATE,
    MEMORY_THRESHOLD,
    MODEL_HELP,
    PROTECT,
    PROTECT_DEFAULT,
    TERM_METHOD,
    option,
    recipe_option,
    translate_options,
    values_of,
    with_memory,
)
from mtkit.cli.process import start_up_without_gc
from mtkit.engines.config import EngineConfig
from mtkit.errors import check
from mtkit.search.config import SearchOverrides, TranslateConfig


@user_errors
def translate_file(
    ctx: typer.Context,
    model: Path = typer.Argument(..., help=MODEL_HELP),
    inputs: list[Path] = typer.Argument(
        ...,
        help="Documents: .txt .html .md .docx .odt .odp .pptx .epub .srt .vtt, software catalogs .po .pot .xlf "
        ".xliff and spreadsheets .xlsx (the content decides).",
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        help="The translation of the one input (default: beside it, report.docx -> report.de.docx).",
    ),
    source_lang: str | None = typer.Option(
        None, "--source-lang", help="The documents' language, for sentence splitting (default: the model's source)."
    ),
    target_lang: str | None = recipe_option(TranslateConfig, "target_lang"),
    beam: int | None = recipe_option(TranslateConfig, "beam"),
    length_penalty: float | None = recipe_option(TranslateConfig, "length_penalty"),
    batch_tokens: int | None = recipe_option(TranslateConfig, "batch_tokens"),
    workers: int | None = recipe_option(TranslateConfig, "workers"),
    device: str = option(EngineConfig, "device"),
    dtype: str = option(EngineConfig, "dtype"),
    engine: str = option(EngineConfig, "engine"),
    ct2_search: str = option(EngineConfig, "ct2_search"),
    max_file_bytes: int = typer.Option(
        0,
        "--max-file-bytes",
        min=0,
        help="Refuse a document over this many bytes, as mtkit serve does (0: any size the machine can hold).",
    ),
    glossary: Path | None = GLOSSARY,
    protect: list[str] = PROTECT,
    protect_default: bool = PROTECT_DEFAULT,
    term_method: str | None = TERM_METHOD,
    fuzzy: bool = typer.Option(
        True,
        "--fuzzy/--no-fuzzy",
        help="Flag a gettext catalog's machine-filled entries fuzzy, for a translator to review (Poedit's and "
        "Weblate's pre-translation do); --no-fuzzy leaves them unflagged. An entry a --memory answered whole (100% "
        "matches) is never flagged.",
    ),
    as_json: bool = typer.Option(False, "--json", help="The summary as JSON."),
    memory: str | None = MEMORY,
    memory_threshold: int = MEMORY_THRESHOLD,
    state: str | None = MEMORY_STATE,
) -> None:
    """Translate documents into files of the same format: every piece of text translated sentence by sentence,
    formatting, layout, timings and everything else kept."""
    from mtkit.documents.safety import Limits, over_limit  # lxml, which other commands need not load

    check(out is None or len(inputs) == 1, "--out names the translation of one input; give one, or drop --out")
    for source in inputs:
        check(source.is_file(), f"{source}: no such file")  # before the model load, not after
        size = source.stat().st_size
        check(
            not max_file_bytes or size <= max_file_bytes,
            f"{source}: {over_limit(size, max_file_bytes)} (--max-file-bytes)",
        )
    engine_cfg = EngineConfig(**values_of(EngineConfig, ctx.params))
    search = SearchOverrides(**values_of(SearchOverrides, ctx.params))  # None: the run's recipe
    # A bad glossary, pattern or method before the model load.
    options = translate_options(search, glossary, protect, protect_default, term_method)
    with start_up_without_gc():
        from mtkit.bulk.document_translation import output_path, translate_documents
        from mtkit.engines.factory import load_translator

        translator = load_translator(model, engine_cfg, options.search)
    options = with_memory(options, memory, memory_threshold, state, translator)
    target = translator.cfg.target_lang or translator.info.get("manifest", {}).get("target_lang") or ""
    outputs = [out] if out is not None else [output_path(source, target) for source in inputs]
    limits = Limits(max_bytes=max_file_bytes or sys.maxsize)
    summary = translate_documents(translator, inputs, outputs, source_lang, limits, options, fuzzy)
    lines = [f"{d['input']} -> {d['output']} ({d['format']}, {d['sentences']} sentences)" for d in summary["documents"]]
    guard = summary["guard"]
    lines.append(
        f"{guard.get('sentences', 0)} sentences in {summary['seconds']} s; the guard: "
        + ", ".join(f"{guard.get(k, 0)} {k}" for k in ("retried", "kept", "tamed", "protected"))
    )
    emit(summary, as_json, "\n".join(lines))
