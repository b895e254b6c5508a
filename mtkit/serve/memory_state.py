"""Translation memories in the state store, each owned by a key as glossaries are: the interface (`MemoryStore`),
its SQLite implementation beside mtkit.serve.state's (`SqliteMemories`, sharing SqliteState's connection; Redis's
is mtkit.serve.redis_state's), and the import every caller runs (`import_memory`): segments written in batches
under a new memory id nobody lists, the memory published in one transaction at the end, so a kill -9 during an
import leaves no half memory. Each memory's index is built once, by its import, and saved (mtkit.memory.index_files)
in the store's `index_root`: beside an SQLite file, `<state file>.indexes/<memory_id>/`; for Redis, whose replicas
share no disk, each machine's cache, $XDG_CACHE_HOME/mtkit/memory-indexes/<memory_id>/ (~/.cache without it), built
there on first use. A missing or stale index is built again on first use; each process keeps the few it opened.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mtkit import faults
from mtkit.errors import UserError
from mtkit.memory.index_files import open_index, remove_index, save_index
from mtkit.memory.matching import MemoryIndex
from mtkit.memory.readers import PairReader

BATCH = 10_000  # segments written per transaction of an import
ABANDONED_S = 3600.0  # an import unpublished this long was killed: its segments are removed by the next import


@dataclass(frozen=True)
class MemoryRecord:
    """One memory as listed: its languages (lower-case codes), times (seconds since the epoch) and size."""

    memory_id: str
    owner: str
    name: str
    source_lang: str
    target_lang: str
    created: float
    updated: float
    segment_count: int


@dataclass(frozen=True)
class Segment:
    """One segment: its position in its memory, source and target, and its times (last_used 0: never)."""

    position: int
    source: str
    target: str
    created: float
    updated: float
    last_used: float = 0.0


class MemoryStore(Protocol):
    """What the CLI and the servers keep of memories; every method is safe to call from several threads.
    `index_root`: the folder the memories' saved indexes are in, one folder each, named by memory id."""

    index_root: Path

    def begin_import(self, memory_id: str, now: float) -> None: ...
    def add_segments(self, memory_id: str, start: int, pairs: Sequence[tuple[str, str]], now: float) -> None: ...
    def publish(self, record: MemoryRecord, replace_name: bool) -> None: ...
    def abandon(self, memory_id: str) -> None: ...
    def memories(self, owner: str) -> list[MemoryRecord]: ...
    def memory(self, owner: str, memory_id: str) -> MemoryRecord | None: ...
    def segments(self, memory_id: str, after: int, count: int, text: str = "", case: bool = False) -> list[Segment]: ...
    def pairs(self, memory_id: str) -> Iterator[tuple[str, str]]: ...
    def mark_used(self, memory_id: str, positions: Sequence[int], now: float) -> None: ...
    def delete(self, owner: str, memory_id: str) -> bool: ...


def find_memory(store: MemoryStore, owner: str, name_or_id: str) -> MemoryRecord | None:
    """The owner's memory of this id, else the newest of this name."""
    found = store.memory(owner, name_or_id)
    if found is not None:
        return found
    named = [record for record in store.memories(owner) if record.name == name_or_id]
    return max(named, key=lambda record: record.created, default=None)


def import_memory(
    store: MemoryStore, reader: PairReader, owner: str, name: str, replace_name: bool, now: float | None = None
) -> tuple[MemoryRecord, int]:
    """The reader's pairs as a new memory, published only once every segment is written and its index saved
    (replacing the owner's memories of that name when `replace_name`); the record and the units skipped. A file
    without one pair of its languages is a UserError, and nothing is kept."""
    memory_id = str(uuid.uuid4())
    now = time.time() if now is None else now
    store.begin_import(memory_id, now)
    pause_ms = faults.armed(faults.MEMORY_IMPORT_PAUSE_MS)
    count = 0

    def written() -> Iterator[tuple[str, str]]:
        """The reader's pairs on their way into the index, written to the store a batch at a time as they pass: one
        read of the file, and no list of every pair held."""
        nonlocal count
        batch: list[tuple[str, str]] = []
        for pair in reader:
            batch.append(pair)
            if len(batch) == BATCH:
                store.add_segments(memory_id, count, batch, now)
                count, batch = count + len(batch), []
                if pause_ms:  # the kill -9 test's moment: segments written, the memory not yet published
                    time.sleep(pause_ms / 1000)
            yield pair
        if batch:
            store.add_segments(memory_id, count, batch, now)
            count += len(batch)

    try:
        index = MemoryIndex(written(), memory_id, languages=lambda: (reader.source_lang, reader.target_lang))
        if not count:
            languages = f"{reader.source_lang or '?'} and {reader.target_lang or '?'}"
            raise UserError(f"{name}: no segment holds both {languages} ({reader.skipped} units skipped)")
        record = MemoryRecord(memory_id, owner, name, reader.source_lang, reader.target_lang, now, now, count)
        _save(store, index)
        store.publish(record, replace_name)
    except BaseException:
        store.abandon(memory_id)
        remove_index(store.index_root / memory_id)
        raise
    return record, reader.skipped


def default_index_root() -> Path:
    """$XDG_CACHE_HOME/mtkit/memory-indexes, else ~/.cache/mtkit/memory-indexes: indexes a store keeps no disk for
    (Redis), rebuilt from the store when gone."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mtkit" / "memory-indexes"


def _save(store: MemoryStore, index: MemoryIndex) -> None:
    """The index saved in the store's root; a root that cannot be written (read-only, full) only costs the next
    process a build."""
    try:
        save_index(index, store.index_root / index.memory_id)
    except OSError:
        pass


def memory_index(store: MemoryStore, record: MemoryRecord) -> MemoryIndex:
    """The memory's saved index, opened; built from its segments and saved first when missing or stale (a stale one
    removed, or it would stand in the new one's way)."""
    folder = store.index_root / record.memory_id
    found = open_index(folder, record.memory_id, record.segment_count)
    if found is not None:
        return found
    languages = (record.source_lang, record.target_lang)
    built = MemoryIndex(store.pairs(record.memory_id), record.memory_id, languages=lambda: languages)
    remove_index(folder)
    _save(store, built)
    return built


class IndexCache:
    """The indexes this process opened (or built), by memory id: a published memory never changes, so its id is its
    version. The `size` most recently used are kept."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._built: OrderedDict[str, MemoryIndex] = OrderedDict()
        self._lock = threading.Lock()

    def index(self, memory_id: str, load: Callable[[], MemoryIndex]) -> MemoryIndex:
        with self._lock:
            if memory_id in self._built:
                self._built.move_to_end(memory_id)
                return self._built[memory_id]
        loaded = load()
        with self._lock:
            self._built[memory_id] = loaded
            while len(self._built) > self.size:
                self._built.popitem(last=False)
        return loaded


SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    memory_id TEXT PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL, source_lang TEXT NOT NULL,
    target_lang TEXT NOT NULL, created REAL NOT NULL, updated REAL NOT NULL, segment_count INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS memories_by_owner ON memories (owner, created);
CREATE TABLE IF NOT EXISTS memory_imports (memory_id TEXT PRIMARY KEY, started REAL NOT NULL);
CREATE TABLE IF NOT EXISTS memory_segments (
    memory_id TEXT NOT NULL, position INTEGER NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL,
    created REAL NOT NULL, updated REAL NOT NULL, last_used REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (memory_id, position)) WITHOUT ROWID;
"""
_COLUMNS = "memory_id, owner, name, source_lang, target_lang, created, updated, segment_count"


def transaction(db: sqlite3.Connection, lock: threading.Lock, statements: Callable[[], object]) -> None:
    """`statements` run in one transaction on the connection SqliteState and SqliteMemories share, behind its lock:
    all of them or, if the process dies half-way (or they raise), none."""
    with lock:
        db.execute("BEGIN IMMEDIATE")
        try:
            statements()
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise


def read_rows(db: sqlite3.Connection, lock: threading.Lock, sql: str, parameters: Sequence[object]) -> list[Any]:
    """Every row `sql` selects, read behind the lock of the connection SqliteState and SqliteMemories share."""
    with lock:
        return db.execute(sql, parameters).fetchall()


class SqliteMemories:
    """MemoryStore in SqliteState's file, on its connection and behind its lock; the indexes beside the file."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock) -> None:
        self._db, self._lock = db, lock
        self._db.executescript(SCHEMA)
        files = [row[2] for row in self._db.execute("PRAGMA database_list") if row[1] == "main"]
        self.index_root = Path(files[0] + ".indexes") if files and files[0] else default_index_root()

    def _transaction(self, statements: Callable[[], object]) -> None:
        transaction(self._db, self._lock, statements)

    def begin_import(self, memory_id: str, now: float) -> None:
        """The import's id noted as pending; the segments and index of imports pending since ABANDONED_S (killed)
        removed."""
        stale: list[str] = []

        def write() -> None:
            stale[:] = [row[0] for row in self._db.execute(
                "SELECT memory_id FROM memory_imports WHERE started < ?", (now - ABANDONED_S,))]  # fmt: skip
            for old in stale:
                self._db.execute("DELETE FROM memory_segments WHERE memory_id = ?", (old,))
                self._db.execute("DELETE FROM memory_imports WHERE memory_id = ?", (old,))
            self._db.execute("INSERT INTO memory_imports (memory_id, started) VALUES (?, ?)", (memory_id, now))

        self._transaction(write)
        for old in stale:
            remove_index(self.index_root / old)

    def add_segments(self, memory_id: str, start: int, pairs: Sequence[tuple[str, str]], now: float) -> None:
        rows = ((memory_id, start + i, source, target, now, now) for i, (source, target) in enumerate(pairs))
        self._transaction(
            lambda: self._db.executemany(
                "INSERT INTO memory_segments (memory_id, position, source, target, created, updated) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
        )

    def publish(self, record: MemoryRecord, replace_name: bool) -> None:
        """The memory listed, its import no longer pending and, with `replace_name`, the owner's memories of that
        name gone: one transaction (their indexes removed after it)."""
        replaced: list[str] = []

        def write() -> None:
            if replace_name:
                same = "SELECT memory_id FROM memories WHERE owner = ? AND name = ?"
                replaced[:] = [row[0] for row in self._db.execute(same, (record.owner, record.name))]
                for old in replaced:
                    self._delete(old)
            self._db.execute(
                f"INSERT INTO memories ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (record.memory_id, record.owner, record.name, record.source_lang, record.target_lang,
                 record.created, record.updated, record.segment_count),
            )  # fmt: skip
            self._db.execute("DELETE FROM memory_imports WHERE memory_id = ?", (record.memory_id,))

        self._transaction(write)
        for old in replaced:
            remove_index(self.index_root / old)

    def _delete(self, memory_id: str) -> None:
        self._db.execute("DELETE FROM memories WHERE memory_id = ?", (memory_id,))
        self._db.execute("DELETE FROM memory_segments WHERE memory_id = ?", (memory_id,))

    def abandon(self, memory_id: str) -> None:
        def write() -> None:
            self._delete(memory_id)
            self._db.execute("DELETE FROM memory_imports WHERE memory_id = ?", (memory_id,))

        self._transaction(write)
        remove_index(self.index_root / memory_id)

    def memories(self, owner: str) -> list[MemoryRecord]:
        query = f"SELECT {_COLUMNS} FROM memories WHERE owner = ? ORDER BY created, memory_id"
        return [MemoryRecord(*row) for row in read_rows(self._db, self._lock, query, (owner,))]

    def memory(self, owner: str, memory_id: str) -> MemoryRecord | None:
        """The owner's memory (None for another owner's: it does not exist for them)."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE memory_id = ? AND owner = ?", (memory_id, owner)
            ).fetchone()
        return None if row is None else MemoryRecord(*row)

    def segments(self, memory_id: str, after: int, count: int, text: str = "", case: bool = False) -> list[Segment]:
        """Up to `count` segments after position `after`, in order; with `text`, those whose source or target
        holds it (in any case unless `case`)."""
        sql = "SELECT position, source, target, created, updated, last_used FROM memory_segments "
        sql += "WHERE memory_id = ? AND position > ?"
        parameters: list[object] = [memory_id, after]
        if text:
            sql += (
                " AND (instr(source, ?) > 0 OR instr(target, ?) > 0)"
                if case
                else " AND (instr(lower(source), ?) > 0 OR instr(lower(target), ?) > 0)"
            )
            parameters += [text if case else text.lower()] * 2
        rows = read_rows(self._db, self._lock, sql + " ORDER BY position LIMIT ?", (*parameters, count))
        return [Segment(*row) for row in rows]

    def pairs(self, memory_id: str) -> Iterator[tuple[str, str]]:
        """Every segment's (source, target), in order, read a batch at a time."""
        after = -1
        while True:
            found = self.segments(memory_id, after, BATCH)
            yield from ((segment.source, segment.target) for segment in found)
            if len(found) < BATCH:
                return
            after = found[-1].position

    def mark_used(self, memory_id: str, positions: Sequence[int], now: float) -> None:
        if positions:
            self._transaction(
                lambda: self._db.executemany(
                    "UPDATE memory_segments SET last_used = ? WHERE memory_id = ? AND position = ?",
                    ((now, memory_id, position) for position in sorted(set(positions))),
                )
            )

    def delete(self, owner: str, memory_id: str) -> bool:
        found: list[bool] = []

        def write() -> None:
            row = self._db.execute(
                "SELECT 1 FROM memories WHERE memory_id = ? AND owner = ?", (memory_id, owner)
            ).fetchone()
            if row is not None:
                self._delete(memory_id)
            found.append(row is not None)

        self._transaction(write)
        if found[0]:
            remove_index(self.index_root / memory_id)
        return found[0]


class ServedMemories:
    """The memories a server translates with: found in the store by owner and name or id, their saved indexes
    opened once per process (IndexCache), their segments marked used after a translation. `store` opens the
    StateStore on first use."""

    def __init__(self, store: Callable[[], Awaitable[object]]) -> None:
        self._store, self.cache = store, IndexCache()

    async def memories(self) -> MemoryStore:
        return (await self._store()).memories  # type: ignore[attr-defined]

    async def index(self, owner: str, name_or_id: str, source: str | None, target: str | None) -> MemoryIndex:
        """The owner's memory, else one of the command line's (owner "", every key's), of the request's languages
        (400 otherwise); another key's is not found (404)."""
        from mtkit.serve.request import RequestError

        store = await self.memories()
        record = await asyncio.to_thread(find_memory, store, owner, name_or_id)
        if record is None and owner:
            record = await asyncio.to_thread(find_memory, store, "", name_or_id)
        if record is None:
            raise RequestError(404, f"Translation memory not found: {name_or_id}")
        for asked, held, what in ((source, record.source_lang, "source"), (target, record.target_lang, "target")):
            if asked and asked != held:
                raise RequestError(400, f"The translation memory's {what} language is {held}, the request's {asked}")
        return await asyncio.to_thread(self.cache.index, record.memory_id, lambda: memory_index(store, record))

    async def used(self, index: MemoryIndex, positions: Sequence[int]) -> None:
        """The segments that answered or were reported, marked used now."""
        if positions:
            store = await self.memories()
            await asyncio.to_thread(store.mark_used, index.memory_id, positions, time.time())
