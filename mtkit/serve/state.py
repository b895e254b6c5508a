"""What mtkit serve keeps across requests and restarts: DeepL glossaries (each owned by the key that made it), the
characters each key has had translated, DeepL documents' status and translated bytes awaiting download, translation
memories (mtkit.serve.memory_state, on the same connection); and
LibreTranslate's translated files, in memory for a bounded time and size (`FileStore`), under names made safe.

`StateStore` is the interface the endpoints use; `SqliteState` implements it in one SQLite file (`--state`), every
write one transaction, so a process killed mid-write leaves the state as before it or as after it. Another backend
(Redis, for replicas) implements the same methods. Keys are never stored: owners are their SHA-256 digests.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

from mtkit import faults
from mtkit.errors import UserError
from mtkit.serve.memory_state import MemoryStore, SqliteMemories, read_rows, transaction
from mtkit.serve.request import RequestError

STATE_FILE = "state.sqlite3"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
DOCUMENT_STATUSES = ("queued", "translating", "done", "error")


def default_state_path() -> Path:
    """$XDG_STATE_HOME/mtkit/state.sqlite3, else ~/.local/state/mtkit/state.sqlite3: the user's, never a run's."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mtkit" / STATE_FILE


def is_redis(state: str) -> bool:
    """--state names a Redis store (replicas) rather than an SQLite file (one server)."""
    return state.startswith(("redis://", "rediss://"))


def owner_of(key: str | None) -> str:
    """Who owns a glossary, a document or a usage count: the key's SHA-256 (\"\" for requests without a key)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest() if key else ""


@dataclass(frozen=True)
class GlossaryRecord:
    """One glossary as stored: its entries (source term, target term) in the order they were given."""

    glossary_id: str
    owner: str
    name: str
    source_lang: str  # lower-case codes, as the server's models name languages
    target_lang: str
    created: float  # seconds since the epoch
    entry_count: int
    entries: tuple[tuple[str, str], ...] = ()  # filled by StateStore.glossary only


@dataclass
class DocumentRecord:
    """A DeepL document translation: who asked, its key, where it stands and, once done, the translated bytes."""

    document_id: str
    owner: str
    document_key: str
    status: str  # one of DOCUMENT_STATUSES
    filename: str = ""  # the translated file's name, once done
    billed_characters: int = 0
    error_message: str = ""
    expires: float = 0.0  # seconds since the epoch; an expired document is gone
    data: bytes = field(default=b"", repr=False)


class StateStore(Protocol):
    """The operations the DeepL endpoints need kept; every method is safe to call from several threads. Translation
    memories are `memories` (mtkit.serve.memory_state)."""

    memories: MemoryStore

    def create_glossary(self, record: GlossaryRecord, entries: Sequence[tuple[str, str]]) -> None: ...
    def glossaries(self, owner: str) -> list[GlossaryRecord]: ...
    def glossary(self, owner: str, glossary_id: str, entries: bool = False) -> GlossaryRecord | None: ...
    def delete_glossary(self, owner: str, glossary_id: str) -> bool: ...
    def characters(self, owner: str) -> int: ...
    def add_characters(self, owner: str, count: int) -> int: ...
    def put_document(self, record: DocumentRecord) -> None: ...
    def document(self, document_id: str, with_data: bool = False) -> DocumentRecord | None: ...
    def close(self) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS glossaries (
    glossary_id TEXT PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL, source_lang TEXT NOT NULL,
    target_lang TEXT NOT NULL, created REAL NOT NULL, entry_count INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS glossaries_by_owner ON glossaries (owner, created);
CREATE TABLE IF NOT EXISTS glossary_entries (
    glossary_id TEXT NOT NULL REFERENCES glossaries (glossary_id) ON DELETE CASCADE, position INTEGER NOT NULL,
    source TEXT NOT NULL, target TEXT NOT NULL, PRIMARY KEY (glossary_id, position));
CREATE TABLE IF NOT EXISTS usage (owner TEXT PRIMARY KEY, characters INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    document_id TEXT PRIMARY KEY, owner TEXT NOT NULL, document_key TEXT NOT NULL, status TEXT NOT NULL,
    filename TEXT NOT NULL, billed_characters INTEGER NOT NULL, error_message TEXT NOT NULL, expires REAL NOT NULL,
    data BLOB NOT NULL);
"""
_GLOSSARY_COLUMNS = "glossary_id, owner, name, source_lang, target_lang, created, entry_count"
_DOCUMENT_COLUMNS = "document_id, owner, document_key, status, filename, billed_characters, error_message, expires"


class SqliteState:
    """StateStore in one SQLite file (WAL journal): one connection behind a lock, each write one transaction."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.executescript(_SCHEMA)
            self._lock = threading.Lock()
            self.memories = SqliteMemories(self._db, self._lock)
        except (OSError, sqlite3.Error) as exc:
            raise UserError(f"--state {self.path}: cannot open the state database ({exc})") from None

    def _write(self, statements: list[tuple[str, Sequence]]) -> None:
        """The statements in one transaction: all of them or, if the process dies half-way, none."""

        def write() -> None:
            for sql, parameters in statements:
                self._db.execute(sql, parameters)

        transaction(self._db, self._lock, write)

    def create_glossary(self, record: GlossaryRecord, entries: Sequence[tuple[str, str]]) -> None:
        """The glossary and its entries, in one transaction (a kill -9 inside it leaves the list as it was)."""
        pause_ms = faults.armed(faults.STATE_WRITE_PAUSE_MS)

        def write() -> None:
            self._db.execute(
                f"INSERT INTO glossaries ({_GLOSSARY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (record.glossary_id, record.owner, record.name, record.source_lang, record.target_lang,
                 record.created, record.entry_count),
            )  # fmt: skip
            self._db.executemany(
                "INSERT INTO glossary_entries (glossary_id, position, source, target) VALUES (?, ?, ?, ?)",
                ((record.glossary_id, i, source, target) for i, (source, target) in enumerate(entries)),
            )
            if pause_ms:  # the kill -9 test's moment: everything written, nothing committed
                time.sleep(pause_ms / 1000)

        transaction(self._db, self._lock, write)

    def glossaries(self, owner: str) -> list[GlossaryRecord]:
        query = f"SELECT {_GLOSSARY_COLUMNS} FROM glossaries WHERE owner = ? ORDER BY created, glossary_id"
        return [GlossaryRecord(*row) for row in read_rows(self._db, self._lock, query, (owner,))]

    def glossary(self, owner: str, glossary_id: str, entries: bool = False) -> GlossaryRecord | None:
        """The owner's glossary (None for another owner's: it does not exist for them), with its entries if asked."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {_GLOSSARY_COLUMNS} FROM glossaries WHERE glossary_id = ? AND owner = ?", (glossary_id, owner)
            ).fetchone()
            if row is None:
                return None
            pairs: tuple[tuple[str, str], ...] = ()
            if entries:
                found = self._db.execute(
                    "SELECT source, target FROM glossary_entries WHERE glossary_id = ? ORDER BY position",
                    (glossary_id,),
                )
                pairs = tuple((source, target) for source, target in found)
        return GlossaryRecord(*row, entries=pairs)

    def delete_glossary(self, owner: str, glossary_id: str) -> bool:
        deleted: list[int] = []

        def write() -> None:
            cursor = self._db.execute(
                "DELETE FROM glossaries WHERE glossary_id = ? AND owner = ?", (glossary_id, owner)
            )
            deleted.append(cursor.rowcount)

        transaction(self._db, self._lock, write)
        return deleted[0] > 0

    def characters(self, owner: str) -> int:
        """Characters translated for this owner so far (DeepL's character_count)."""
        with self._lock:
            row = self._db.execute("SELECT characters FROM usage WHERE owner = ?", (owner,)).fetchone()
        return int(row[0]) if row else 0

    def add_characters(self, owner: str, count: int) -> int:
        """Counts `count` more characters for the owner; the new total."""
        self._write(
            [
                (
                    "INSERT INTO usage (owner, characters) VALUES (?, ?) "
                    "ON CONFLICT (owner) DO UPDATE SET characters = characters + excluded.characters",
                    (owner, count),
                )
            ]
        )
        return self.characters(owner)

    def put_document(self, record: DocumentRecord) -> None:
        """The document as it now stands (made, or moved on); expired documents are removed at the same time."""
        self._write(
            [
                ("DELETE FROM documents WHERE expires <= ?", (time.time(),)),
                (
                    f"INSERT OR REPLACE INTO documents ({_DOCUMENT_COLUMNS}, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (record.document_id, record.owner, record.document_key, record.status, record.filename,
                     record.billed_characters, record.error_message, record.expires, record.data),
                ),
            ]
        )  # fmt: skip

    def document(self, document_id: str, with_data: bool = False) -> DocumentRecord | None:
        """The document (its bytes only when asked), or None when unknown or expired."""
        columns = _DOCUMENT_COLUMNS + (", data" if with_data else "")
        with self._lock:
            row = self._db.execute(
                f"SELECT {columns} FROM documents WHERE document_id = ? AND expires > ?", (document_id, time.time())
            ).fetchone()
        return None if row is None else DocumentRecord(*row)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def safe_filename(filename: str) -> str:
    """The last part of a client's file name, reduced to letters, digits, dot, dash and underscore."""
    base = PurePosixPath(filename.replace("\\", "/")).name
    return _UNSAFE.sub("_", base).strip("._") or "document"


def translated_filename(filename: str, target: str) -> str:
    """report.docx into German: report.de.docx."""
    path = PurePosixPath(safe_filename(filename))
    return f"{path.stem}.{target}{path.suffix}"


@dataclass
class StoredFile:
    filename: str  # what the browser saves it as
    data: bytes
    expires: float


class FileStore:
    """Translated documents by name until they expire (`seconds` after they were made) or, when `max_bytes` would
    be passed, the oldest are dropped first. In memory: no upload or translation ever touches the server's disk."""

    def __init__(self, max_bytes: int, seconds: float) -> None:
        self.max_bytes, self.seconds = max_bytes, seconds
        self._files: OrderedDict[str, StoredFile] = OrderedDict()

    def put(self, filename: str, data: bytes, now: float) -> str:
        """Keep `data`; its name: an unguessable token, then the file's own name made safe for a URL."""
        self._expire(now)
        if len(data) > self.max_bytes:
            raise RequestError(413, f"the translated file ({len(data)} bytes) is over this server's file store")
        while self._files and sum(len(f.data) for f in self._files.values()) + len(data) > self.max_bytes:
            self._files.popitem(last=False)
        name = f"{secrets.token_urlsafe(24)}.{safe_filename(filename)}"
        self._files[name] = StoredFile(filename, data, now + self.seconds)
        return name

    def get(self, name: str, now: float) -> StoredFile | None:
        self._expire(now)
        return self._files.get(name)

    def _expire(self, now: float) -> None:
        for name in [name for name, stored in self._files.items() if stored.expires <= now]:
            del self._files[name]
