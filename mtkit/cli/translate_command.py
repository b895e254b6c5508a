"""`mtkit translate`: raw text translated line by line through either engine (mtkit.engines.streaming), or a
shard of a file with --shard (mtkit.bulk.file_translation); registered on the app by mtkit.cli.main. Translations on
stdout or --output, progress and the summary on stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import typer

from mtkit.cli.command import shard_note, user_errors
from mtkit.cli.options import (
    GLOSSARY,
    MEMORY,
    MEMORY_STATE,
    MEMORY_THRESHOLD,
    MODEL_HELP,
    OVERWRITE_SHARD,
    PROTECT,
    PROTECT_DEFAULT,
    SHARD,
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

# translate's options that change its lines beyond the search's: with the search, what every shard shares
SHARD_IDENTITY = "engine ct2_search shortlist scores split_sentences source_lang strict ensemble prefix_file".split()


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
    term_method: str | None = TERM_METHOD,
    case: bool = typer.Option(
        True,
        "--case/--no-case",
        help="Translate a line in capitals or Title Case in sentence case and give it the line's case back; "
        "--no-case sends lines as they are (the raw model).",
    ),
    guard: bool = typer.Option(
        True,
        "--guard/--no-guard",
        help="Check each line's best translation as --split-sentences does (an empty or runaway one, or one far "
        "shorter than its source, retried) and count what the guard did; --no-guard gives the raw model's best "
        "(with --nbest or --prefix-file the lines are never guarded).",
    ),
    shard: str | None = SHARD,
    overwrite: bool = OVERWRITE_SHARD,
    memory: str | None = MEMORY,
    memory_threshold: int = MEMORY_THRESHOLD,
    state: str | None = MEMORY_STATE,
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
    check(guard or not split_sentences, "--split-sentences always guards its sentences: drop --no-guard")
    engine_cfg = EngineConfig(**values_of(EngineConfig, ctx.params))
    # The search options left at None keep the run's recipe; the others (sampling, nbest) override it.
    search = SearchOverrides(**values_of(SearchOverrides, ctx.params))
    # A bad file, pattern or method before the load.
    options = translate_options(search, glossary, protect, protect_default, term_method, case)
    with start_up_without_gc():
        from mtkit.engines.factory import load_translator
        from mtkit.engines.plans import split_options
        from mtkit.engines.streaming import translate_stream
        from mtkit.files import read_lines
        from mtkit.text.line_plan import guarded

        translator = load_translator(model, engine_cfg, options.search)
    options = with_memory(options, memory, memory_threshold, state, translator)
    check(memory is None or spec is None, "--memory with --shard: not yet; translate the file whole")
    lines = split_options(translator, source_lang, split_sentences, options)
    # The sentence plan's guard or the line plan: the rule mtkit serve answers a request by too.
    split, plain = (lines, None) if guarded(split_sentences, guard, nbest, prefix_file is not None) else (None, lines)
    check(
        memory is None or split is not None,
        "--memory answers sentences of the guarded plan: drop --no-guard, --nbest and --prefix-file",
    )
    if spec is not None:
        from mtkit.bulk.file_translation import translate_shard
        from mtkit.console import log
        from mtkit.engines.streaming import CHUNK_LINES

        options = {name: ctx.params[name] for name in SHARD_IDENTITY}
        if ensemble:  # only with one: a shard begun before ensembles had modes still resumes
            options["ensemble_mode"] = ensemble_mode
        if glossary or protect or not protect_default or not case:  # only when set, as ensemble_mode
            from mtkit.files import file_identity

            # The glossary file's identity (path, size, time), not its path alone: one rewritten is another job.
            terms_file = file_identity(glossary) if glossary else str(glossary)
            options |= {"glossary": terms_file, "protect": protect, "protect_default": protect_default, "case": case}
        if term_method is not None:  # the model's default otherwise, which the model's identity holds
            options["term_method"] = term_method
        if (
            split is not None and not split_sentences
        ):  # a shard begun by the line path (--no-guard or before) is not resumed
            options["guard"] = True
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
