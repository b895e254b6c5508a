"""The `mtkit` command line: one short function per subcommand, the only writer to stdout.

Heavy modules (torch, sentencepiece) are imported inside the commands so `mtkit --help` is instant.
User mistakes (UserError) print one line and exit with the code of errors.py (mtkit.cli.command); bugs keep their
traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import typer

from mtkit.cli import clean_command as cli_clean
from mtkit.cli import data_commands as cli_data
from mtkit.cli import document_commands as cli_documents
from mtkit.cli import preprocess_command as cli_preprocess
from mtkit.cli import serve_command as cli_serve
from mtkit.cli import shortlist_command as cli_shortlist
from mtkit.cli.command import emit, shard_note, user_errors
from mtkit.cli.data_commands import MODEL_HELP
from mtkit.cli.options import (
    GLOSSARY,
    OVERWRITE_SHARD,
    PROTECT,
    PROTECT_DEFAULT,
    SHARD,
    given_option,
    option,
    recipe_option,
    text_options,
    values_of,
)
from mtkit.cli.process import cap_onednn_cache, exit_now, start_up_without_gc, tune_allocator
from mtkit.engines.config import EngineConfig
from mtkit.errors import check
from mtkit.score import TOKENIZE
from mtkit.search.config import SearchOverrides, TranslateConfig
from mtkit.training.config import TrainConfig

# translate's options that change its lines beyond the search's: with the search, what every shard shares
SHARD_IDENTITY = "engine ct2_search shortlist scores split_sentences source_lang strict ensemble prefix_file".split()

app = typer.Typer(
    name="mtkit",
    help="Train and run Transformer translation models: preprocess -> train -> average -> translate -> score.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# `mtkit preprocess` (mtkit.cli.preprocess_command), registered first: `mtkit --help` lists commands as registered.
app.command("preprocess")(cli_preprocess.preprocess)


@app.command()
@user_errors
def train(
    data_dir: Path = typer.Argument(..., help="DATA_DIR written by `mtkit preprocess`."),
    save_dir: Path = typer.Option(..., "--save-dir", help="RUN_DIR: checkpoints, config, sentencepiece model."),
    config: Path | None = typer.Option(None, "--config", "-c", help="Recipe TOML."),
    arch: str | None = typer.Option(None, "--arch", help="Model preset: tiny, small, base, big."),
    max_steps: int | None = given_option(TrainConfig, "max_steps"),
    max_epochs: int | None = given_option(TrainConfig, "max_epochs"),
    max_time: float | None = given_option(TrainConfig, "max_time_minutes", "--max-time"),
    log_interval: int | None = given_option(TrainConfig, "log_interval"),
    tensorboard: Path | None = given_option(TrainConfig, "tensorboard_dir", "--tensorboard"),
    init_from: Path | None = given_option(TrainConfig, "init_from"),
    overrides: list[str] = typer.Option([], "--set", help="Override a recipe value: section.key=value (repeatable)."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the resolved configuration; read no data, train nothing."
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Train a Transformer (resumes when RUN_DIR has checkpoints); works under torchrun."""
    from mtkit.recipe import resolve_recipe

    flags = {
        "max_steps": max_steps,
        "max_epochs": max_epochs,
        "max_time_minutes": max_time,
        "log_interval": log_interval,
        "init_from": str(init_from) if init_from is not None else None,
        "tensorboard_dir": str(tensorboard) if tensorboard is not None else None,
    }
    extra = [f"train.{k}={v!r}" for k, v in flags.items() if v is not None]
    if dry_run:
        from mtkit.training.distributed import training_device
        from mtkit.training.loop import resolve_train_precision

        recipe = resolve_recipe(config, arch, list(overrides) + extra)
        recipe = resolve_train_precision(recipe, training_device(recipe.train.device))  # what auto becomes here
        emit(recipe.as_dict(), as_json, json.dumps(recipe.as_dict(), indent=2))
        return
    from mtkit.corpus.binarized import read_manifest
    from mtkit.training.loop import train as run_train

    manifest = read_manifest(data_dir)
    recipe = resolve_recipe(config, arch, list(overrides) + extra, vocab_size=manifest["vocab_size"])
    summary = run_train(data_dir, save_dir, recipe)
    if summary is not None:
        emit(
            summary,
            as_json,
            f"trained to step {summary['step']} ({summary['stop']}); averaged model: {summary['average']}",
        )


@app.command()
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


@app.command()
@user_errors
def translate(
    ctx: typer.Context,
    model: Path = typer.Argument(..., help=MODEL_HELP),
    beam: int | None = recipe_option(TranslateConfig, "beam"),
    length_penalty: float | None = recipe_option(TranslateConfig, "length_penalty"),
    max_len_a: float | None = recipe_option(TranslateConfig, "max_len_a"),
    max_len_b: int | None = recipe_option(TranslateConfig, "max_len_b"),
    batch_tokens: int | None = recipe_option(TranslateConfig, "batch_tokens"),
    workers: int | None = recipe_option(TranslateConfig, "workers"),
    nbest: int = option(TranslateConfig, "nbest"),
    target_lang: str | None = recipe_option(TranslateConfig, "target_lang"),
    scores: bool = typer.Option(
        False,
        "--scores",
        help="Prefix each line with its score and its confidence (mean log-prob per token), each then a tab.",
    ),
    split_sentences: bool = typer.Option(
        False,
        "--split-sentences",
        help="Translate each line sentence by sentence (a paragraph a line), white space kept as written.",
    ),
    source_lang: str | None = typer.Option(
        None, "--source-lang", help="The input's language for --split-sentences (default: the model's source)."
    ),
    device: str = option(EngineConfig, "device"),
    dtype: str = option(EngineConfig, "dtype"),
    input: Path | None = typer.Option(None, "--input", "-i", help="Input file (default stdin)."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Output file (default stdout)."),
    strict: bool = typer.Option(False, "--strict", help="Reject over-long lines instead of truncating them."),
    sampling: bool = option(TranslateConfig, "sampling"),
    top_k: int = option(TranslateConfig, "top_k"),
    top_p: float = option(TranslateConfig, "top_p"),
    temperature: float = option(TranslateConfig, "temperature"),
    ensemble: list[Path] = option(EngineConfig, "ensemble"),
    ensemble_mode: str = option(EngineConfig, "ensemble_mode"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
    engine: str = option(EngineConfig, "engine"),
    ct2_search: str = option(EngineConfig, "ct2_search"),
    shortlist: bool = option(EngineConfig, "shortlist"),
    prefix_file: Path | None = typer.Option(
        None, "--prefix-file", help="Text each translation must begin with: one line per input line, empty for none."
    ),
    glossary: Path | None = GLOSSARY,
    protect: list[str] = PROTECT,
    protect_default: bool = PROTECT_DEFAULT,
    case: bool = typer.Option(
        True,
        "--case/--no-case",
        help="Translate a line in capitals or Title Case in sentence case and give it the line's case back; "
        "--no-case sends lines as they are (the raw model).",
    ),
    shard: str | None = SHARD,
    overwrite: bool = OVERWRITE_SHARD,
) -> None:
    """Translate raw text, one sentence per line (or, with --split-sentences, a paragraph per line), in order; empty
    lines stay empty. Placeholders, URLs, e-mail addresses, code and numbers are kept as written."""
    import signal

    from mtkit.bulk.shards import resolve_shard

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends us quietly, like any Unix filter
    check(input is None or input.is_file(), f"{input}: no such file")  # before the model load, not after
    to_file = input is not None and output is not None  # only a file's lines are shared out (the environment's too)
    check(to_file or shard is None, f"--shard {shard}: give --input and --output (each shard writes its own file)")
    spec = resolve_shard(shard, os.environ) if to_file else None
    check_prefix_file(prefix_file, input)
    check(
        not split_sentences or (nbest == 1 and prefix_file is None),
        "--split-sentences translates each sentence's best: drop --nbest and --prefix-file, or --split-sentences",
    )
    engine_cfg = EngineConfig(**values_of(EngineConfig, ctx.params))
    # The search options left at None keep the run's recipe; the others (sampling, nbest) override it.
    search = SearchOverrides(**values_of(SearchOverrides, ctx.params))
    terms = text_options(glossary, protect, protect_default) | {"case": case}  # a bad file or pattern before the load
    with start_up_without_gc():
        from mtkit.engines.factory import load_translator
        from mtkit.engines.splitting import split_options
        from mtkit.engines.streaming import translate_stream
        from mtkit.files import read_lines

        translator = load_translator(model, engine_cfg, search)
    lines = split_options(translator, source_lang, split_sentences, **terms)
    split, plain = (lines, None) if split_sentences else (None, lines)
    if spec is not None:
        from mtkit.bulk.file_translation import translate_shard
        from mtkit.console import log
        from mtkit.engines.streaming import CHUNK_LINES

        options = {name: ctx.params[name] for name in SHARD_IDENTITY}
        if ensemble:  # only with one: a shard begun before ensembles had modes still resumes
            options["ensemble_mode"] = ensemble_mode
        if glossary or protect or not protect_default or not case:  # only when set, as ensemble_mode
            options |= {"glossary": str(glossary), "protect": protect, "protect_default": protect_default, "case": case}
        summary = translate_shard(
            translator,
            input,
            output,
            spec,
            CHUNK_LINES,
            options,
            scores,
            strict,
            prefix_file,
            split,
            overwrite,
            quiet,
            plain=plain,
        )  # type: ignore[arg-type]
        log(shard_note(summary))
        return
    with contextlib.ExitStack() as files:
        source = files.enter_context(open(input, "rb")) if input is not None else sys.stdin.buffer
        target = files.enter_context(open(output, "w", encoding="utf-8")) if output is not None else sys.stdout
        translate_stream(
            translator,
            source,
            target,
            with_scores=scores,
            strict=strict,
            quiet=quiet,
            name=str(input) if input else "<stdin>",
            prefixes=read_lines(prefix_file) if prefix_file else None,
            prefix_name=str(prefix_file),
            split=split,
            plain=plain,
        )


def check_prefix_file(prefix_file: Path | None, input: Path | None) -> None:
    """Before the model load: the prefix file exists and, when the input is a file too, has as many lines."""
    if prefix_file is None:
        return
    from mtkit.files import count_lines

    check(prefix_file.is_file(), f"{prefix_file}: no such file")
    if input is not None:
        prefixes, lines = count_lines(prefix_file), count_lines(input)
        check(
            prefixes == lines,
            f"{prefix_file}: {prefixes} lines, {input} {lines}; give one prefix per input line (empty for none)",
        )


@app.command()
@user_errors
def score(
    hyp: Path | None = typer.Argument(None, help="Hypothesis file (default stdin)."),
    ref: list[Path] = typer.Option(..., "--ref", "-r", help="Reference file (repeatable)."),
    tokenize: str = typer.Option(TOKENIZE, "--tokenize", help="sacrebleu tokenizer: 13a, intl, zh, ja-mecab, none..."),
    legacy: bool = typer.Option(False, "--legacy", help="Also print paper-style tokenized, compound-split BLEU."),
    lc_tok: bool = typer.Option(
        False,
        "--lc-tok",
        help="Also print the Multi30k literature's BLEU: lower-cased, "
        "punctuation-normalised, Moses-tokenized (docs/translating.md; needs '.[moses]').",
    ),
    lc_tok_lang: str | None = typer.Option(
        None,
        "--lc-tok-lang",
        help="Language for --lc-tok's Moses scripts (default: the first --ref's suffix, e.g. de).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print {bleu, chrf, ter, signature, ...} as JSON."),
) -> None:
    """BLEU, chrF and TER through sacrebleu, with sacrebleu's signature."""
    from mtkit.files import read_lines, read_stream_lines
    from mtkit.score import score_files

    hyps = list(read_lines(hyp, "replace")) if hyp is not None else list(read_stream_lines(sys.stdin.buffer))
    result = score_files(
        hyps, str(hyp or "<stdin>"), list(ref), tokenize=tokenize, legacy=legacy, lc_tok=lc_tok, lc_tok_lang=lc_tok_lang
    )
    text = f"{result.bleu_detail}\nsignature: {result.signature}\nchrF2 = {result.chrf}\nTER = {result.ter}"
    if result.legacy_bleu is not None:
        text += f"\nlegacy tokenized BLEU (13a tokens, compound-split; compare with the paper) = {result.legacy_bleu}"
    if result.lc_tok_bleu is not None:
        text += f"\nlower-cased, normalised, Moses-tokenized BLEU (the Multi30k literature's) = {result.lc_tok_bleu}"
    emit(result.as_dict(), as_json, text)


# The commands that run a trained model over data (mtkit.cli.data_commands), where `mtkit --help` lists them.
app.command("score-pairs")(cli_data.score_pairs)
app.command("filter-pairs")(cli_data.filter_pairs)
app.command("back-translate")(cli_data.back_translate)
app.command("distill")(cli_data.distill)
app.command("clean-distilled")(cli_clean.clean_distilled_command)
app.command("merge-shards")(cli_data.merge_shards)
app.command("translate-file")(cli_documents.translate_file)
app.command("shortlist")(cli_shortlist.shortlist)


@app.command()
@user_errors
def export(
    model: Path = typer.Argument(..., help=MODEL_HELP),
    to: str = typer.Option(..., "--to", help="Target format: ctranslate2 or huggingface (MarianMTModel)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output directory (written atomically)."),
    quantization: str | None = typer.Option(
        None, "--quantization", help="ctranslate2: int8, int8_float32, float16 or bfloat16 (default float32)."
    ),
    score_json: Path | None = typer.Option(
        None, "--score", help="huggingface: `mtkit score --json` output to quote in the model card."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Export a trained model to CTranslate2 or Hugging Face transformers, used without mtkit (README beside it)."""
    check(to in ("ctranslate2", "huggingface"), f"--to {to}: supported formats: ctranslate2, huggingface")
    check(to == "ctranslate2" or quantization is None, "--quantization applies to --to ctranslate2 only")
    if to == "huggingface":
        from mtkit.huggingface.convert import export_huggingface

        result = export_huggingface(model, out, score_json)
        made_with = f"transformers {result['transformers']}"
    else:
        from mtkit.exports.ctranslate2 import export_ctranslate2

        result = export_ctranslate2(model, out, quantization)
        made_with = f"CTranslate2 {result['ctranslate2']}, {result['quantization']}"
    emit(
        result,
        as_json,
        f"{result['out']} <- {result['checkpoint']} ({made_with}, {result['bytes'] / 2**20:.1f} MiB); "
        f"see {result['out']}/README.md",
    )


@app.command(name="import")
@user_errors
def import_model(
    source: Path = typer.Argument(
        ..., help="A local Hugging Face MarianMTModel directory (e.g. a downloaded opus-mt model)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="RUN_DIR to create (written atomically)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Import a Marian model as a run directory that translate, serve, export and train --init-from use."""
    from mtkit.huggingface.convert import import_huggingface

    result = import_huggingface(source, out)
    emit(
        result,
        as_json,
        f"{result['out']} <- {result['source']}; fine-tune with -c {result['out']}/recipe.toml "
        f"--init-from {result['out']} (docs/huggingface.md)",
    )


# `mtkit serve` (mtkit.cli.serve_command), last in `mtkit --help`.
app.command("serve")(cli_serve.serve)


def main() -> None:
    """The console script: process settings first, then the command, then a fast exit (mtkit.cli.process)."""
    tune_allocator()
    cap_onednn_cache()
    try:
        app()
        code: Any = 0
    except SystemExit as exc:  # click ends every command with sys.exit
        code = exc.code
    exit_now(code)
