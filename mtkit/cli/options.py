"""Typer options read from the dataclass fields they set: an option's default and help are declared once, in
the field (`field(default=..., metadata={"help": ...})`), and the command line only names it.

Also what several commands share, declared once here: the help of a MODEL argument, the bulk commands' --shard and
--engine (with its default), and the text options of the commands that translate (--glossary, --protect,
--term-method). Used by the command modules of mtkit.cli; builds option declarations and parses nothing but the
glossary, patterns and term method they name, into one TranslateOptions (translate_options).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from mtkit.engines.options import TranslateOptions
    from mtkit.search.config import SearchOverrides


def config_field(cls: type, name: str) -> dataclasses.Field:
    """The field `name` of dataclass `cls`, which must have a plain default and a help text."""
    found = {f.name: f for f in dataclasses.fields(cls)}[name]
    assert found.default is not dataclasses.MISSING, f"{cls.__name__}.{name}: no plain default to show"
    assert "help" in found.metadata, f"{cls.__name__}.{name}: no metadata help"
    return found


def flag(name: str) -> str:
    """The command-line spelling of a field name: max_len_a -> --max-len-a."""
    return "--" + name.replace("_", "-")


def option(cls: type, name: str, *aliases: str, negatable: bool = False) -> Any:
    """An option whose default and help are the field's: `port: int = option(ServeConfig, "port")`.
    `negatable`: a boolean spelled --name/--no-name, so a command line can turn off what a recipe turned on."""
    found = config_field(cls, name)
    spelling = flag(name) + (f"/--no-{flag(name)[2:]}" if negatable else "")
    return typer.Option(found.default, spelling, *aliases, help=found.metadata["help"])


def recipe_option(cls: type, name: str, *aliases: str) -> Any:
    """An option that defaults to the run's recipe (None here); its help names the field's default, which is the
    recipe's own unless the recipe sets it."""
    found = config_field(cls, name)
    return typer.Option(
        None, flag(name), *aliases, help=f"{found.metadata['help']} Default: the run's recipe ({found.default})."
    )


def given_option(cls: type, name: str, *spellings: str, default: Any = None) -> Any:
    """An option that sets the field only when typed on the command line (None, or `default`, otherwise: the
    recipe's value stands); its help is the field's. `spellings`: the flag and its aliases when the flag is not the
    field's name (`--max-time` for max_time_minutes)."""
    found = {f.name: f for f in dataclasses.fields(cls)}[name]
    assert "help" in found.metadata, f"{cls.__name__}.{name}: no metadata help"
    return typer.Option(default, *(spellings or (flag(name),)), help=found.metadata["help"])


def values_of(cls: type, params: dict[str, Any]) -> dict[str, Any]:
    """The entries of a command's parsed `params` that are fields of `cls`, to build it with."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {key: value for key, value in params.items() if key in names}


MODEL_HELP = "RUN_DIR (uses its averaged model) or a checkpoint file."

# The bulk commands' share of their input (mtkit.bulk.shards; typer reads a declaration, never changes it).
SHARD = typer.Option(
    None,
    "--shard",
    metavar="K/N",
    help="Take shard K of N (K from 1 to N): a contiguous share of the input's lines, written beside the output as "
    "OUTPUT.shard-K-of-N; the shard that completes the set merges it (docs/many-machines.md). Default: from "
    "torchrun's RANK/WORLD_SIZE or a Slurm job array's SLURM_ARRAY_TASK_ID; 1/1: the whole input here.",
)
OVERWRITE_SHARD = typer.Option(
    False, "--overwrite", help="With --shard: start the shard again instead of going on from an unfinished run of it."
)

# The engine of filter-pairs, back-translate and distill (bulk_engine gives its default).
BULK_ENGINE = typer.Option(
    None,
    "--engine",
    help="ctranslate2 (the default for bulk work) or torch (the default, and the only engine, for distill's "
    "--ensemble).",
)


def bulk_engine(engine: str | None, ensemble: list[Path] | None = None) -> str:
    """--engine of the bulk commands (BULK_ENGINE): as given, else torch for an ensemble and ctranslate2 otherwise."""
    return engine or ("torch" if ensemble else "ctranslate2")


# What `mtkit translate`, `translate-file`, `distill` and `back-translate` keep as written and the terms they take,
# and how (docs/terminology.md).
GLOSSARY = typer.Option(
    None,
    "--glossary",
    metavar="FILE",
    help="A glossary: TSV (source<TAB>target a line) or, for a name ending in .csv, CSV (source,target a row); each "
    "source term found (whole words, any case, longest first) is translated as its target.",
)
PROTECT = typer.Option(
    [],
    "--protect",
    metavar="REGEX",
    help="Also keep text matching this regular expression as written (repeatable).",
)
PROTECT_DEFAULT = typer.Option(
    True,
    "--protect-default/--no-protect-default",
    help="Keep placeholders ({name}, %s, $VAR), URLs, e-mail addresses, inline code, paths, math and numbers "
    "with separators or units as written, and copy lines of them only.",
)


TERM_METHOD = typer.Option(
    None,
    "--term-method",
    metavar="METHOD",
    help="How the glossary's terms reach the model: placeholder, inline, check-first, check-first-inline, guided or "
    "replace (the model's own word for the term, found by its attention, replaced; docs/terminology.md). "
    "Default: the model's, inline (its term hints, then a stand-in) for a model trained with term hints, else "
    "replace (then a stand-in where the term's word is not found); guided (the torch engine's search places each "
    "target) is faster where nearly every line holds terms, but writes a target beside the model's own word.",
)


def translate_options(
    search: SearchOverrides,
    glossary: Path | None,
    protect: list[str],
    protect_default: bool,
    term_method: str | None = None,
    case: bool = True,
) -> TranslateOptions:
    """A command's TranslateOptions: its search options, the glossary read, the patterns compiled and the term method
    checked (a one-line error naming the file's line, the pattern or --term-method), before the model loads."""
    from mtkit.engines.options import TranslateOptions
    from mtkit.text.glossary import checked_term_method, load_glossary
    from mtkit.text.protect import ProtectConfig

    return TranslateOptions(
        search,
        load_glossary(glossary) if glossary is not None else None,
        ProtectConfig(protect_default, tuple(protect)),
        "" if term_method is None else checked_term_method(term_method, "--term-method"),
        case,
    )


# A translation memory for `mtkit translate` and `translate-file` (docs/memories.md), in `mtkit serve`'s store.
MEMORY = typer.Option(
    None,
    "--memory",
    metavar="NAME",
    help="A translation memory (mtkit memory import): sentences it holds are answered with its translation, "
    "placeholders and numbers the sentence's own; the best fuzzy match of every other is reported, and patched "
    "where the model's translations of the words that differ stand in it (docs/memories.md).",
)
MEMORY_THRESHOLD = typer.Option(
    75, "--memory-threshold", min=0, max=100, help="The lowest fuzzy score (0-100) a match is reported at."
)
MEMORY_STATE = typer.Option(
    None, "--state", help="The store --memory is in: an SQLite file or redis://HOST:PORT/DB, as `mtkit serve --state`."
)


def with_memory(
    options: TranslateOptions, memory: str | None, threshold: int, state: str | None, translator: Any
) -> TranslateOptions:
    """`options` with the memory NAME of the store `state`, its saved index opened (a one-line error for a memory the
    store lacks, or one of another language pair than the translator's model, where its data names one)."""
    if memory is None:
        return options
    manifest = translator.info.get("manifest", {})
    pair = (manifest.get("source_lang") or "").lower(), (manifest.get("target_lang") or "").lower()
    import dataclasses

    from mtkit.cli.memory_command import open_store
    from mtkit.console import warn
    from mtkit.corpus.fuzzy_matches import fuzzy_piece
    from mtkit.errors import check
    from mtkit.serve.memory_state import find_memory, memory_index
    from mtkit.serve.state import owner_of

    store = open_store(state)
    record = find_memory(store.memories, owner_of(None), memory)
    check(record is not None, f"--memory {memory}: no such memory (mtkit memory list shows them)")
    found = (record.source_lang, record.target_lang)
    check(
        not all(pair) or found == pair,
        f"--memory {memory}: a {found[0]}-{found[1]} memory, and the model translates {pair[0]}-{pair[1]}",
    )
    index = memory_index(store.memories, record)  # built and saved here if its import could not save it
    store.close()
    if not fuzzy_piece(translator.tokenizer):
        warn(
            f"--memory {memory}: this model was not trained with fuzzy matches (docs/memories.md): its exact "
            "matches answer sentences, its fuzzy ones are reported (and patched where they can be), not given to the "
            "model"
        )
    return dataclasses.replace(options, memory=index, memory_threshold=threshold)
