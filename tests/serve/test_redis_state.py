"""mtkit/serve/redis_state.py against a real redis-server (Debian's; skipped at once, naming it, where it is not
installed): a key's window shared by two clients as by two replicas, translated files across them with expiry and
the size budget, a store that goes away answered 503 with its URL and no password, and its return recovered from.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mtkit.serve.api_keys import KeyLimiter, MemoryWindows
from mtkit.serve.request import RequestError
from tests.serve.outside_services import INSTALL, REDIS, Redis

pytestmark = pytest.mark.skipif(REDIS is None, reason=f"redis-server is not installed: {INSTALL}")
redis_state = pytest.importorskip("mtkit.serve.redis_state")
pytest.importorskip("redis", reason="redis (redis-py) is not installed: pip install -e '.[serve]'")


@pytest.fixture
def redis_server(tmp_path: Path):
    started = Redis(tmp_path)
    yield started
    started.stop()


def test_a_keys_limit_holds_across_replicas(redis_server: Redis) -> None:
    one, two = redis_state.RedisState(redis_server.url), redis_state.RedisState(redis_server.url)
    limiters = [KeyLimiter({"k": 5, "open": None}, one), KeyLimiter({"k": 5, "open": None}, two)]
    for i in range(5):
        limiters[i % 2].admit("k", 0.0)
    for limiter in limiters:
        with pytest.raises(RequestError) as refused:
            limiter.admit("k", 0.0)
        assert refused.value.status == 429
    limiters[1].admit("open", 0.0)  # no limit, never counted
    assert not any(b"k" == key.rsplit(b":", 1)[-1] for key in one.client.keys("*"))  # stored as its hash only
    assert one.hit("short", 1, 0.2) and not two.hit("short", 1, 0.2)
    time.sleep(0.25)
    assert two.hit("short", 1, 0.2)  # the window moves on by the store's clock


def test_memory_windows_keep_the_single_server_default() -> None:
    windows = MemoryWindows()
    assert windows.hit("k", 2, 60, 0.0) and windows.hit("k", 2, 60, 1.0) and not windows.hit("k", 2, 60, 2.0)
    assert windows.hit("k", 2, 60, 60.0)  # the first left the window


def test_files_across_replicas_with_expiry_and_budget(redis_server: Redis) -> None:
    one, two = redis_state.RedisState(redis_server.url), redis_state.RedisState(redis_server.url)
    put, get = redis_state.RedisFiles(one, 100, 60), redis_state.RedisFiles(two, 100, 60)
    name = put.put("report.de.txt", b"x" * 40, 0.0)
    found = get.get(name, 0.0)
    assert found is not None and (found.filename, found.data) == ("report.de.txt", b"x" * 40)
    second = put.put("b.txt", b"y" * 40, 0.0)
    third = put.put("c.txt", b"z" * 40, 0.0)  # 120 > 100: the oldest goes
    assert get.get(name, 0.0) is None and get.get(second, 0.0) is not None and get.get(third, 0.0) is not None
    with pytest.raises(RequestError) as too_big:
        put.put("d.txt", b"w" * 101, 0.0)
    assert too_big.value.status == 413
    short = redis_state.RedisFiles(one, 100, 0.2)
    brief = short.put("e.txt", b"e", 0.0)
    time.sleep(0.3)
    assert get.get(brief, 0.0) is None
    assert get.get("no-such-file.txt", 0.0) is None


def test_a_store_that_goes_away_is_a_503_then_recovers(redis_server: Redis) -> None:
    url = redis_server.url.replace("redis://", "redis://:secret@")  # a password never reaches a message
    state = redis_state.RedisState(url)
    files = redis_state.RedisFiles(state, 1000, 60)
    assert state.problem() == "" and state.hit("k", 10, 60)
    redis_server.stop()
    problem = state.problem()
    assert problem.startswith(f"redis://127.0.0.1:{redis_server.port}/0 does not answer") and "secret" not in problem
    for attempt in (lambda: state.hit("k", 10, 60), lambda: files.put("a.txt", b"a", 0.0), lambda: files.get("a", 0.0)):
        with pytest.raises(RequestError) as gone:
            attempt()
        assert gone.value.status == 503 and "does not answer" in str(gone.value) and "secret" not in str(gone.value)
    redis_server.start()  # an empty store again (nothing saved): scripts are loaded anew on first use
    assert state.problem() == ""
    assert state.hit("k", 10, 60)
    assert files.get(files.put("a.txt", b"a", 0.0), 0.0) is not None


def test_only_redis_urls() -> None:
    from mtkit.errors import UserError

    with pytest.raises(UserError, match="expected redis://HOST:PORT/DB"):
        redis_state.RedisState("state.sqlite")


def test_deepl_state_shared_by_replicas(redis_server: Redis) -> None:
    """mtkit.serve.state's StateStore in Redis: a glossary made through one replica is listed, read and deleted
    through another, only by its owner; characters add up across replicas; a document expires when told."""
    from mtkit.serve.state import DocumentRecord, GlossaryRecord, owner_of

    one, two = redis_state.RedisState(redis_server.url), redis_state.RedisState(redis_server.url)
    owner, other = owner_of("key-a"), owner_of("key-b")
    entries = [("dog", "Hund"), ("snow", "Schnee")]
    record = GlossaryRecord("g1", owner, "animals", "en", "de", 1700000000.25, len(entries))
    one.create_glossary(record, entries)
    one.create_glossary(GlossaryRecord("g2", owner, "more", "en", "de", 1700000001.0, 0), [])
    assert [g.glossary_id for g in two.glossaries(owner)] == ["g1", "g2"] and two.glossaries(other) == []
    assert two.glossary(owner, "g1") == record
    assert two.glossary(owner, "g1", entries=True).entries == tuple(entries)
    assert two.glossary(other, "g1") is None and not two.delete_glossary(other, "g1")
    assert two.delete_glossary(owner, "g1") and one.glossary(owner, "g1") is None
    assert [g.glossary_id for g in one.glossaries(owner)] == ["g2"]
    assert one.add_characters(owner, 10) == 10 and two.add_characters(owner, 5) == 15 and one.characters(owner) == 15
    assert one.characters(other) == 0
    document = DocumentRecord("d1", owner, "secret-doc-key", "done", "a.de.txt", 12, "", time.time() + 60, b"bytes")
    one.put_document(document)
    assert two.document("d1", with_data=True) == document
    assert two.document("d1").data == b"" and two.document("d1").status == "done"
    one.put_document(DocumentRecord("d2", owner, "k", "queued", expires=time.time() + 0.2))
    assert two.document("d2") is not None
    time.sleep(0.3)
    assert two.document("d2") is None and two.document("unknown") is None
    one.close()
