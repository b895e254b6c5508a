"""`mtkit memory import|list|export|delete`: translation memories in the store `mtkit serve` reads (`--state`, the
same default), owned by the owner of requests without a key, so a memory imported here is served; registered on
the app by mtkit.cli.main. Results on stdout (JSON with --json), one-line errors.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from mtkit.cli.command import emit, user_errors
from mtkit.errors import check

app = typer.Typer(
    help="Translation memories: import TMX, PO, XLIFF or TSV, list, export as TMX, delete (docs/memories.md).",
    no_args_is_help=True,
)
STATE = typer.Option(
    None,
    "--state",
    help="The store: an SQLite file or redis://HOST:PORT/DB, as `mtkit serve --state` "
    "(default ~/.local/state/mtkit/state.sqlite3, or under $XDG_STATE_HOME).",
)


def open_store(state: str | None) -> Any:
    """The StateStore `mtkit serve --state` would open."""
    from mtkit.serve.redis_state import RedisState
    from mtkit.serve.state import SqliteState, default_state_path, is_redis

    if state and is_redis(state):
        return RedisState(state)
    return SqliteState(state or default_state_path())


def _named(store: Any, name: str) -> Any:
    from mtkit.serve.memory_state import find_memory
    from mtkit.serve.state import owner_of

    found = find_memory(store.memories, owner_of(None), name)
    check(found is not None, f"memory {name!r}: no such memory (mtkit memory list shows them)")
    return found


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@app.command("import")
@user_errors
def import_file(
    file: Path = typer.Argument(..., help="A .tmx (TMX 1.4b), .po, .xlf/.xliff (units with targets) or .tsv file."),
    name: str = typer.Option(..., "--name", help="The memory's name; an existing memory of this name is replaced."),
    source_lang: str = typer.Option("", "--source-lang", help="The source language (default: the file's own)."),
    target_lang: str = typer.Option("", "--target-lang", help="The target language (default: the file's own)."),
    state: str | None = STATE,
    as_json: bool = typer.Option(False, "--json", help="The result as JSON."),
) -> None:
    """Import a memory: read as a stream and published at once when whole (a killed import leaves nothing)."""
    from mtkit.memory.readers import pair_reader
    from mtkit.serve.memory_state import import_memory
    from mtkit.serve.state import owner_of

    check(file.is_file(), f"{file}: no such file")
    check(bool(name.strip()), "--name: give the memory a name")
    store = open_store(state)
    with open(file, "rb") as stream:
        reader = pair_reader(stream, str(file), source_lang, target_lang)
        record, skipped = import_memory(store.memories, reader, owner_of(None), name, replace_name=True)
    store.close()
    data = {"memory_id": record.memory_id, "name": record.name, "segments": record.segment_count, "skipped": skipped}
    data |= {"source_lang": record.source_lang, "target_lang": record.target_lang}
    text = f"{name}: {record.segment_count} segments {record.source_lang}->{record.target_lang}, {skipped} skipped"
    emit(data, as_json, text)


@app.command("list")
@user_errors
def list_memories(
    state: str | None = STATE, as_json: bool = typer.Option(False, "--json", help="The list as JSON.")
) -> None:
    """List the memories: name, languages, segments, when imported."""
    from mtkit.serve.state import owner_of

    store = open_store(state)
    found = store.memories.memories(owner_of(None))
    store.close()
    rows = [
        {"memory_id": r.memory_id, "name": r.name, "source_lang": r.source_lang, "target_lang": r.target_lang,
         "segments": r.segment_count, "created": _stamp(r.created)}
        for r in found
    ]  # fmt: skip
    text = "\n".join(
        f"{r['name']}\t{r['source_lang']}->{r['target_lang']}\t{r['segments']} segments\t{r['created']}" for r in rows
    )
    emit({"memories": rows}, as_json, text or "no memories")


@app.command("export")
@user_errors
def export(
    name: str = typer.Argument(..., help="The memory's name (or id)."),
    file: Path = typer.Argument(..., help="The TMX file to write."),
    state: str | None = STATE,
) -> None:
    """Export a memory as TMX 1.4b."""
    from mtkit.files import atomic_write
    from mtkit.memory.tmx import write_tmx

    store = open_store(state)
    record = _named(store, name)
    with atomic_write(file) as stream:  # a reader never sees half a file
        count = write_tmx(store.memories.pairs(record.memory_id), stream, record.source_lang, record.target_lang)
    store.close()
    emit({"file": str(file), "segments": count}, False, f"{file}: {count} segments")


@app.command("delete")
@user_errors
def delete(name: str = typer.Argument(..., help="The memory's name (or id)."), state: str | None = STATE) -> None:
    """Delete a memory and its segments."""
    from mtkit.serve.state import owner_of

    store = open_store(state)
    record = _named(store, name)
    store.memories.delete(owner_of(None), record.memory_id)
    store.close()
    emit({"deleted": record.memory_id}, False, f"{name}: deleted")
