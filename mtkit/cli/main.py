"""The `mtkit` command line: the Typer app, each command registered from its module (mtkit.cli.<command>_command,
back-translate and distill from mtkit.cli.synthetic_commands) in the order `mtkit --help` lists them, and main(), the
console script. Nothing else: the commands, the only writers to stdout, are their modules'.

The command modules import heavy modules (torch, sentencepiece) inside the commands, so `mtkit --help` is instant.
User mistakes (UserError) print one line and exit with the code of errors.py (mtkit.cli.command); bugs keep their
traceback.
"""

from __future__ import annotations

from typing import Any

import typer

from mtkit.cli import (
    average_command,
    clean_distilled_command,
    collect_catalogs_command,
    export_command,
    filter_pairs_command,
    import_command,
    memory_command,
    merge_shards_command,
    preprocess_command,
    score_command,
    score_pairs_command,
    serve_command,
    shortlist_command,
    synthetic_commands,
    train_command,
    translate_command,
    translate_file_command,
)
from mtkit.cli.process import cap_onednn_cache, exit_now, tune_allocator

app = typer.Typer(
    name="mtkit",
    help="Train and run Transformer translation models: preprocess -> train -> average -> translate -> score.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# `mtkit --help` lists the commands in the order they are registered: the main job first, serving last.
app.command("preprocess")(preprocess_command.preprocess)
app.command("collect-catalogs")(collect_catalogs_command.collect_catalogs_command)
app.command("train")(train_command.train)
app.command("average")(average_command.average)
app.command("translate")(translate_command.translate)
app.command("score")(score_command.score)
app.command("score-pairs")(score_pairs_command.score_pairs)
app.command("filter-pairs")(filter_pairs_command.filter_pairs)
app.command("back-translate")(synthetic_commands.back_translate)
app.command("distill")(synthetic_commands.distill)
app.command("clean-distilled")(clean_distilled_command.clean_distilled_command)
app.command("merge-shards")(merge_shards_command.merge_shards)
app.command("translate-file")(translate_file_command.translate_file)
app.command("shortlist")(shortlist_command.shortlist)
app.command("export")(export_command.export)
app.command("import")(import_command.import_model)
app.command("serve")(serve_command.serve)
app.add_typer(memory_command.app, name="memory")


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
