"""`mtkit translate-file`: documents translated into files of their own format (mtkit.bulk.document_translation),
registered on the app by mtkit.cli.main. A summary on stdout (JSON with --json), progress and the guard on stderr.
"""

from __future__ import annotations

from pathlib import Path

import typer

from mtkit.cli.command import emit, user_errors
from mtkit.cli.data_commands import MODEL_HELP
from mtkit.cli.options import option, recipe_option, values_of
from mtkit.cli.process import start_up_without_gc
from mtkit.engines.config import EngineConfig
from mtkit.errors import check
from mtkit.search.config import TranslateConfig


@user_errors
def translate_file(
    ctx: typer.Context,
    model: Path = typer.Argument(..., help=MODEL_HELP),
    inputs: list[Path] = typer.Argument(
        ..., help="Documents: .txt .html .md .docx .odt .odp .pptx .epub .srt .vtt (the content decides)."
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
    as_json: bool = typer.Option(False, "--json", help="The summary as JSON."),
) -> None:
    """Translate documents into files of the same format: every piece of text translated sentence by sentence,
    formatting, layout, timings and everything else kept."""
    check(out is None or len(inputs) == 1, "--out names the translation of one input; give one, or drop --out")
    for source in inputs:
        check(source.is_file(), f"{source}: no such file")  # before the model load, not after
    overrides = {k: v for k, v in values_of(TranslateConfig, ctx.params).items() if v is not None}
    with start_up_without_gc():
        from mtkit.bulk.document_translation import output_path, translate_documents
        from mtkit.engines.factory import load_translator

        translator = load_translator(model, engine, device=device, dtype=dtype, ct2_search=ct2_search, **overrides)
    target = translator.cfg.target_lang or translator.info.get("manifest", {}).get("target_lang") or ""
    outputs = [out] if out is not None else [output_path(source, target) for source in inputs]
    summary = translate_documents(translator, inputs, outputs, source_lang)
    lines = [f"{d['input']} -> {d['output']} ({d['format']}, {d['sentences']} sentences)" for d in summary["documents"]]
    guard = summary["guard"]
    lines.append(
        f"{guard.get('sentences', 0)} sentences in {summary['seconds']} s; the guard: "
        + ", ".join(f"{guard.get(k, 0)} {k}" for k in ("retried", "kept", "tamed"))
    )
    emit(summary, as_json, "\n".join(lines))
