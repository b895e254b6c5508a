"""mtkit/serve/memory_state.py and the Redis memories of mtkit/serve/redis_state.py, the same tests on both: an import
published whole or not at all, owners kept apart, a name replaced, pages after a cursor with a text filter, last use
kept, deletion; a memory imported through one Redis client read through another, as by two replicas; each memory's
index saved by its import and opened by later processes, removed with its memory, built again when missing."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from mtkit.errors import UserError
from mtkit.memory import matching
from mtkit.memory.index_files import open_index
from mtkit.memory.matching import MemoryIndex
from mtkit.memory.tmx import TmxReader, write_tmx
from mtkit.serve import memory_state
from mtkit.serve.memory_state import IndexCache, find_memory, import_memory, memory_index
from mtkit.serve.state import SqliteState
from tests.serve.outside_services import REDIS, Redis

PAIRS = [(f"A dog number {i} runs.", f"Hund Nummer {i} rennt.") for i in range(25)] + [("A CAT sleeps.", "Katze.")]


def tmx(pairs: list[tuple[str, str]]) -> TmxReader:
    data = io.BytesIO()
    write_tmx(iter(pairs), data, "en", "de")
    return TmxReader(io.BytesIO(data.getvalue()), "m.tmx")


@pytest.fixture(params=["sqlite", "redis"])
def stores(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple]:
    """Two handles on one store (two replicas' view); Redis's indexes in a cache folder of the test's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    if request.param == "sqlite":
        yield SqliteState(tmp_path / "s.sqlite3"), SqliteState(tmp_path / "s.sqlite3")
        return
    if REDIS is None:
        pytest.skip("redis-server is not installed")
    from mtkit.serve.redis_state import RedisState

    server = Redis(tmp_path)
    yield RedisState(server.url), RedisState(server.url)
    server.stop()


def test_import_list_pages_filter_use_and_delete(stores: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_state, "BATCH", 10)  # three batches
    one, two = stores[0].memories, stores[1].memories
    record, skipped = import_memory(one, tmx(PAIRS), "owner", "pets", replace_name=True, now=100.0)
    assert (record.segment_count, skipped, record.source_lang, record.target_lang) == (26, 0, "en", "de")
    assert [m.memory_id for m in two.memories("owner")] == [record.memory_id] and two.memories("other") == []
    assert two.memory("other", record.memory_id) is None and find_memory(two, "owner", "pets") == record
    assert list(two.pairs(record.memory_id)) == PAIRS
    page = two.segments(record.memory_id, -1, 10)
    assert [s.position for s in page] == list(range(10)) and page[0].created == 100.0
    assert [s.source for s in two.segments(record.memory_id, page[-1].position, 100, "number 2")] == [
        "A dog number 2 runs.",
        *(f"A dog number {i} runs." for i in range(20, 25)),
    ][1:]
    assert [s.target for s in two.segments(record.memory_id, -1, 5, "cat")] == ["Katze."]
    assert two.segments(record.memory_id, -1, 5, "cat", case=True) == []
    one.mark_used(record.memory_id, [3], 200.0)
    assert two.segments(record.memory_id, 2, 1)[0].last_used == 200.0
    again, _ = import_memory(one, tmx(PAIRS[:2]), "owner", "pets", replace_name=True)
    assert [m.memory_id for m in two.memories("owner")] == [again.memory_id]  # the name replaced
    assert list(two.pairs(record.memory_id)) == []
    assert not two.delete("other", again.memory_id) and two.delete("owner", again.memory_id)
    assert two.memories("owner") == []


def test_a_failed_import_leaves_nothing(stores: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_state, "BATCH", 10)
    one = stores[0].memories
    broken = io.BytesIO()
    write_tmx(iter(PAIRS), broken, "en", "de")
    reader = TmxReader(io.BytesIO(broken.getvalue()[:-300]), "cut.tmx")  # 20 segments read, then broken XML
    with pytest.raises(UserError, match="cut.tmx: not well-formed"):
        import_memory(one, reader, "owner", "half", replace_name=True)
    assert one.memories("owner") == []
    with pytest.raises(UserError, match="no segment holds both en and fr"):
        import_memory(one, TmxReader(io.BytesIO(broken.getvalue()), "m.tmx", "en", "fr"), "owner", "x", True)
    assert one.memories("owner") == []


def test_the_index_cache_builds_each_memory_once() -> None:
    built = []
    cache = IndexCache(size=1)

    def load() -> MemoryIndex:
        built.append(1)
        return MemoryIndex(PAIRS)

    assert cache.index("a", load) is cache.index("a", load) and len(built) == 1
    cache.index("b", load)
    cache.index("a", load)
    assert len(built) == 3  # "a" was dropped for "b"


def test_the_import_saves_the_index_later_processes_open(stores: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = stores[0].memories, stores[1].memories
    record, _ = import_memory(one, tmx(PAIRS), "owner", "pets", replace_name=True)
    folder = one.index_root / record.memory_id
    assert (folder / "index.json").is_file() and two.index_root == one.index_root
    monkeypatch.setattr(matching, "index_arrays", None)  # opened, never built
    opened = memory_index(two, record)
    monkeypatch.undo()
    assert opened.best("A dog number 7 runs.").translation == "Hund Nummer 7 rennt." and len(opened) == len(PAIRS)
    assert opened.best("A dog number 7 runs!", 75).target == "Hund Nummer 7 rennt."
    memory_state.remove_index(folder)  # lost (a cache cleared, another replica): built again on first use, and saved
    assert memory_index(two, record).best("A CAT sleeps.").target == "Katze." and folder.is_dir()
    (folder / "index.json").write_text('{"format": 0}')  # stale (an older mtkit's): replaced by a new one
    assert memory_index(two, record).best("A CAT sleeps.").target == "Katze."
    assert open_index(folder, record.memory_id, len(PAIRS)) is not None
    again, _ = import_memory(one, tmx(PAIRS[:3]), "owner", "pets", replace_name=True)
    assert not folder.exists() and (one.index_root / again.memory_id).is_dir()  # replaced with its memory
    assert two.delete("owner", again.memory_id) and not (one.index_root / again.memory_id).exists()


def test_a_failed_import_leaves_no_index(stores: tuple) -> None:
    one = stores[0].memories
    broken = io.BytesIO()
    write_tmx(iter(PAIRS), broken, "en", "de")
    with pytest.raises(UserError):
        import_memory(one, TmxReader(io.BytesIO(broken.getvalue()[:-300]), "cut.tmx"), "owner", "half", True)
    assert not one.index_root.exists() or [p.name for p in one.index_root.iterdir()] == []


def test_an_sqlite_stores_indexes_are_beside_its_file(tmp_path: Path) -> None:
    assert SqliteState(tmp_path / "s.sqlite3").memories.index_root == tmp_path / "s.sqlite3.indexes"
