"""The state mtkit serve's replicas share in Redis (`--state redis://HOST:PORT/DB`, redis-py): each API key's
requests in its moving window, so a key's limit holds across replicas; translated files awaiting download, with
their expiry and size budget, so an upload to one replica downloads through another; and mtkit.serve.state's
StateStore (DeepL's glossaries, characters per key, documents, translation memories), so a glossary or a memory
made on one replica serves on all.

Each change is one Lua script (atomic on the Redis server) timed by the server's clock, so replicas' clocks never
disagree. Keys are stored as their SHA-256, never as written. A store that does not answer is a 503 naming it;
redis-py connects again on the next request, so the server recovers when the store comes back.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from mtkit.errors import UserError, check
from mtkit.memory.index_files import remove_index
from mtkit.serve.memory_state import ABANDONED_S, BATCH, MemoryRecord, Segment, default_index_root
from mtkit.serve.request import RequestError
from mtkit.serve.state import DocumentRecord, GlossaryRecord, StoredFile, safe_filename

TIMEOUT_S = 2.0  # a store slower than this is as good as gone: the request is answered 503, not held
PREFIX = "mtkit:"

# KEYS[1]: the key's window (a sorted set of request ids by time); ARGV: limit, window in ms, this request's id.
ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

# KEYS: the files' index (names by time), their sizes, the new file's hash; ARGV: name, file name, bytes, lifetime
# in ms, the budget in bytes, the prefix of a file's hash. Expired files leave the budget, then the oldest go first.
PUT_FILE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function drop(name)
  redis.call('DEL', ARGV[6] .. name)
  redis.call('HDEL', KEYS[2], name)
  redis.call('ZREM', KEYS[1], name)
end
for _, name in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[4]))) do drop(name) end
local total = 0
for _, size in ipairs(redis.call('HVALS', KEYS[2])) do total = total + tonumber(size) end
local size = string.len(ARGV[3])
while total + size > tonumber(ARGV[5]) and redis.call('ZCARD', KEYS[1]) > 0 do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
  total = total - tonumber(redis.call('HGET', KEYS[2], oldest) or '0')
  drop(oldest)
end
redis.call('HSET', KEYS[3], 'filename', ARGV[2], 'data', ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], size)
return 1
"""

# KEYS: the glossary's hash, its owner's index; ARGV: the owner. Deleted only by its owner.
DELETE_GLOSSARY = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], string.sub(KEYS[1], string.len(ARGV[2]) + 1))
return 1
"""
GLOSSARY_FIELDS = ("glossary_id", "owner", "name", "source_lang", "target_lang", "created", "entry_count")
DOCUMENT_FIELDS = ("document_id", "owner", "document_key", "status", "filename", "billed_characters")
DOCUMENT_FIELDS += ("error_message", "expires")


def public_url(url: str) -> str:
    """The store's URL without a password, for messages and logs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"


class RedisState:
    """Keys' windows and translated files in one Redis database, shared by every replica that names it."""

    def __init__(self, url: str) -> None:
        check(url.startswith(("redis://", "rediss://")), f"--state {public_url(url)}: expected redis://HOST:PORT/DB")
        try:
            import redis
        except ImportError:
            raise UserError(f"--state {public_url(url)} needs redis-py: pip install -e '.[serve]'") from None

        self.url = public_url(url)
        self.errors = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
        self.client = redis.Redis.from_url(url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S)
        self._admit = self.client.register_script(ADMIT)  # EVALSHA, loaded again after a restart of the store
        self._put_file = self.client.register_script(PUT_FILE)
        self._delete_glossary = self.client.register_script(DELETE_GLOSSARY)
        self.memories = RedisMemories(self)

    def problem(self) -> str:
        """Empty when the store answers, else what went wrong (GET /ready's reason)."""
        try:
            self.client.ping()
        except self.errors as exc:
            return f"{self.url} does not answer ({exc})"
        return ""

    def _call(self, what: str, operation: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return operation(*args, **kwargs)
        except self.errors as exc:
            raise RequestError(
                503,
                f"the shared state store ({self.url}) does not answer, so {what} cannot be done now; "
                f"translation without it still answers ({type(exc).__name__})",
            ) from None

    def hit(self, key: str, limit: int, window_s: float, now: float = 0.0) -> bool:
        """Count a request of `key` in its window when under `limit` (by the store's clock: `now` is unused);
        False, nothing counted, at the limit."""
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
        keys = [f"{PREFIX}window:{digest}"]
        args = [limit, int(window_s * 1000), secrets.token_hex(8)]
        return bool(self._call("an API key's limit", self._admit, keys=keys, args=args))

    # mtkit.serve.state.StateStore: DeepL's glossaries, characters per owner and documents.

    def create_glossary(self, record: GlossaryRecord, entries: Sequence[tuple[str, str]]) -> None:
        """The glossary, its entries and its place in the owner's list, in one transaction (MULTI)."""
        fields = {name: str(getattr(record, name)) for name in GLOSSARY_FIELDS} | {"entries": json.dumps(entries)}
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(f"{PREFIX}glossary:{record.glossary_id}", mapping=fields)
        pipe.zadd(f"{PREFIX}glossaries:{record.owner}", {record.glossary_id: record.created})
        self._call("a glossary's keeping", pipe.execute)

    def glossaries(self, owner: str) -> list[GlossaryRecord]:
        ids = self._call("the glossaries' listing", self.client.zrange, f"{PREFIX}glossaries:{owner}", 0, -1)
        found = [self.glossary(owner, glossary_id.decode()) for glossary_id in ids]
        return [record for record in found if record is not None]

    def glossary(self, owner: str, glossary_id: str, entries: bool = False) -> GlossaryRecord | None:
        """The owner's glossary (None for another owner's), with its entries if asked."""
        found = self._call("a glossary's reading", self.client.hgetall, f"{PREFIX}glossary:{glossary_id}")
        values = {key.decode(): value.decode("utf-8") for key, value in found.items()}
        if values.get("owner") != owner:
            return None
        pairs = tuple(tuple(pair) for pair in json.loads(values["entries"])) if entries else ()
        created, count = float(values["created"]), int(values["entry_count"])
        text = [values[name] for name in GLOSSARY_FIELDS[:5]]
        return GlossaryRecord(*text, created, count, entries=pairs)  # type: ignore[arg-type]

    def delete_glossary(self, owner: str, glossary_id: str) -> bool:
        keys = [f"{PREFIX}glossary:{glossary_id}", f"{PREFIX}glossaries:{owner}"]
        deleted = self._call(
            "a glossary's deletion", self._delete_glossary, keys=keys, args=[owner, f"{PREFIX}glossary:"]
        )
        return bool(deleted)

    def characters(self, owner: str) -> int:
        """Characters translated for this owner so far, on every replica (DeepL's character_count)."""
        return int(self._call("a key's usage", self.client.get, f"{PREFIX}usage:{owner}") or 0)

    def add_characters(self, owner: str, count: int) -> int:
        return int(self._call("a key's usage", self.client.incrby, f"{PREFIX}usage:{owner}", count))

    def put_document(self, record: DocumentRecord) -> None:
        """The document as it now stands, replacing what was kept; Redis drops it when it expires."""
        key = f"{PREFIX}document:{record.document_id}"
        fields = {name: str(getattr(record, name)) for name in DOCUMENT_FIELDS} | {"data": record.data}
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(key)
        pipe.hset(key, mapping=fields)
        pipe.pexpireat(key, int(record.expires * 1000))
        self._call("a document's keeping", pipe.execute)

    def document(self, document_id: str, with_data: bool = False) -> DocumentRecord | None:
        names = DOCUMENT_FIELDS + (("data",) if with_data else ())
        found = self._call("a document's reading", self.client.hmget, f"{PREFIX}document:{document_id}", names)
        if found[0] is None:
            return None
        values = dict(zip(names, found))
        text = {name: values[name].decode("utf-8") for name in DOCUMENT_FIELDS}
        return DocumentRecord(
            **text | {"billed_characters": int(text["billed_characters"]), "expires": float(text["expires"])},
            data=values.get("data") or b"",
        )  # type: ignore[arg-type]

    def close(self) -> None:
        self.client.close()


class RedisFiles:
    """mtkit.serve.state.FileStore's put and get, in Redis: every replica sees every file."""

    def __init__(self, state: RedisState, max_bytes: int, seconds: float) -> None:
        self.state, self.max_bytes, self.seconds = state, max_bytes, seconds

    def put(self, filename: str, data: bytes, now: float) -> str:
        if len(data) > self.max_bytes:
            raise RequestError(413, f"the translated file ({len(data)} bytes) is over this server's file store")
        name = f"{secrets.token_urlsafe(24)}.{safe_filename(filename)}"
        keys = [f"{PREFIX}files", f"{PREFIX}file-sizes", f"{PREFIX}file:{name}"]
        args = [name, filename, data, int(self.seconds * 1000), self.max_bytes, f"{PREFIX}file:"]
        self.state._call("a translated file's keeping", self.state._put_file, keys=keys, args=args)
        return name

    def get(self, name: str, now: float) -> StoredFile | None:
        found = self.state._call("a download", self.state.client.hgetall, f"{PREFIX}file:{name}")
        if not found or b"data" not in found:
            return None
        return StoredFile(found[b"filename"].decode("utf-8", "replace"), found[b"data"], now)


MEMORY_FIELDS = ("memory_id", "owner", "name", "source_lang", "target_lang", "created", "updated", "segment_count")


class RedisMemories:
    """mtkit.serve.memory_state.MemoryStore in Redis: a memory's fields in a hash, its owner's list a sorted set,
    its segments a list of JSON [source, target, created, updated] (last use in a hash by position). An import's
    segments expire unless published (PERSIST, in the publishing MULTI), so a killed import leaves nothing. The
    indexes are in this machine's cache (default_index_root), which a deletion here clears; another replica's copy
    of a deleted memory's index is never opened again (its memory id is never reused)."""

    def __init__(self, state: RedisState) -> None:
        self.state, self.client = state, state.client
        self.index_root = default_index_root()

    def _segments_key(self, memory_id: str) -> str:
        return f"{PREFIX}memory-segments:{memory_id}"

    def begin_import(self, memory_id: str, now: float) -> None:
        return None  # nothing to note: the segments' expiry is the pending mark

    def add_segments(self, memory_id: str, start: int, pairs: Sequence[tuple[str, str]], now: float) -> None:
        key = self._segments_key(memory_id)
        pipe = self.client.pipeline(transaction=True)
        pipe.rpush(key, *(json.dumps([source, target, now, now]) for source, target in pairs))
        pipe.expire(key, int(ABANDONED_S))
        self.state._call("a memory's import", pipe.execute)

    def publish(self, record: MemoryRecord, replace_name: bool) -> None:
        """The memory listed and its segments kept for good, with the owner's memories of that name gone when
        `replace_name`, in one MULTI."""
        old = [found.memory_id for found in self.memories(record.owner) if found.name == record.name]
        pipe = self.client.pipeline(transaction=True)
        for memory_id in old if replace_name else []:
            self._delete(pipe, record.owner, memory_id)
        pipe.hset(f"{PREFIX}memory:{record.memory_id}", mapping={n: str(getattr(record, n)) for n in MEMORY_FIELDS})
        pipe.zadd(f"{PREFIX}memories:{record.owner}", {record.memory_id: record.created})
        pipe.persist(self._segments_key(record.memory_id))
        self.state._call("a memory's import", pipe.execute)
        for memory_id in old if replace_name else []:
            remove_index(self.index_root / memory_id)

    def _delete(self, pipe: Any, owner: str, memory_id: str) -> None:
        pipe.delete(f"{PREFIX}memory:{memory_id}", self._segments_key(memory_id), f"{PREFIX}memory-used:{memory_id}")
        pipe.zrem(f"{PREFIX}memories:{owner}", memory_id)

    def abandon(self, memory_id: str) -> None:
        self.state._call("a memory's import", self.client.delete, self._segments_key(memory_id))

    def memories(self, owner: str) -> list[MemoryRecord]:
        ids = self.state._call("the memories' listing", self.client.zrange, f"{PREFIX}memories:{owner}", 0, -1)
        found = [self.memory(owner, memory_id.decode()) for memory_id in ids]
        return [record for record in found if record is not None]

    def memory(self, owner: str, memory_id: str) -> MemoryRecord | None:
        found = self.state._call("a memory's reading", self.client.hgetall, f"{PREFIX}memory:{memory_id}")
        values = {key.decode(): value.decode("utf-8") for key, value in found.items()}
        if values.get("owner") != owner:
            return None
        text = [values[name] for name in MEMORY_FIELDS[:5]]
        return MemoryRecord(*text, float(values["created"]), float(values["updated"]), int(values["segment_count"]))

    def segments(self, memory_id: str, after: int, count: int, text: str = "", case: bool = False) -> list[Segment]:
        """Up to `count` segments after position `after`, in order, those holding `text` when given (read a batch
        at a time until the page is full)."""
        key, found, start = self._segments_key(memory_id), [], after + 1
        wanted = text if case else text.lower()
        while len(found) < count:
            rows = self.state._call("a memory's reading", self.client.lrange, key, start, start + BATCH - 1)
            if not rows:
                break
            used = self.state._call(
                "a memory's reading",
                self.client.hmget,
                f"{PREFIX}memory-used:{memory_id}",
                [str(p) for p in range(start, start + len(rows))],
            )
            for position, row, last in zip(range(start, start + len(rows)), rows, used):
                source, target, created, updated = json.loads(row)
                if not text or wanted in (source + "\n" + target if case else (source + "\n" + target).lower()):
                    found.append(Segment(position, source, target, created, updated, float(last or 0)))
                    if len(found) == count:
                        break
            start += len(rows)
        return found

    def pairs(self, memory_id: str) -> Iterator[tuple[str, str]]:
        key, start = self._segments_key(memory_id), 0
        while True:
            rows = self.state._call("a memory's reading", self.client.lrange, key, start, start + BATCH - 1)
            for row in rows:
                source, target = json.loads(row)[:2]
                yield source, target
            if len(rows) < BATCH:
                return
            start += BATCH

    def mark_used(self, memory_id: str, positions: Sequence[int], now: float) -> None:
        if positions:
            mapping = {str(position): now for position in positions}
            self.state._call("a memory's use", self.client.hset, f"{PREFIX}memory-used:{memory_id}", mapping=mapping)

    def delete(self, owner: str, memory_id: str) -> bool:
        if self.memory(owner, memory_id) is None:
            return False
        pipe = self.client.pipeline(transaction=True)
        self._delete(pipe, owner, memory_id)
        self.state._call("a memory's deletion", pipe.execute)
        remove_index(self.index_root / memory_id)
        return True
