"""DeepL's state on mtkit serve: the SQLite store's operations and owners, DeepL's request fields, and glossaries
across a restart and across a kill -9 in the middle of a create (real server processes on 127.0.0.1)."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest
import requests

from mtkit.serve.deepl_request import body_fields, glossary_entries, languages_answer, parse_translate
from mtkit.serve.request import RequestError
from mtkit.serve.state import DocumentRecord, GlossaryRecord, SqliteState, owner_of
from tests.serve.test_app import Server


def record(glossary_id: str, owner: str, count: int = 1) -> GlossaryRecord:
    return GlossaryRecord(glossary_id, owner, "g", "en", "de", time.time(), count)


def test_the_store_keeps_glossaries_per_owner_usage_and_documents(tmp_path: Path) -> None:
    store = SqliteState(tmp_path / "state" / "state.sqlite3")
    alice, bob = owner_of("alice"), owner_of("bob")
    assert alice != bob and "alice" not in alice and owner_of(None) == ""
    store.create_glossary(record("g1", alice, 2), [("dog", "Hund"), ("cat", "Katze")])
    assert [g.glossary_id for g in store.glossaries(alice)] == ["g1"] and store.glossaries(bob) == []
    assert store.glossary(bob, "g1") is None and not store.delete_glossary(bob, "g1")
    assert store.glossary(alice, "g1", entries=True).entries == (("dog", "Hund"), ("cat", "Katze"))
    assert store.add_characters(alice, 5) == 5 and store.add_characters(alice, 7) == 12 and store.characters(bob) == 0
    document = DocumentRecord("D1", alice, "K", "done", "a.de.txt", 3, expires=time.time() + 60, data=b"abc")
    store.put_document(document)
    assert store.document("D1").data == b"" and store.document("D1", with_data=True).data == b"abc"
    store.put_document(DocumentRecord("D2", alice, "K", "queued", expires=time.time() - 1))
    assert store.document("D2") is None  # expired
    store.close()
    again = SqliteState(tmp_path / "state" / "state.sqlite3")
    assert again.delete_glossary(alice, "g1") and again.glossaries(alice) == [] and again.characters(alice) == 12
    with pytest.raises(sqlite3.IntegrityError):  # a create that fails half-way leaves nothing behind
        again.create_glossary(record("g2", alice, 2), [("dog", "Hund"), ("cat", None)])  # type: ignore[list-item]
    assert again.glossaries(alice) == []


def test_deepl_fields_from_json_forms_and_the_query() -> None:
    form = b"text=A+dog.&text=A+cat.&target_lang=EN-GB&auth_key=k"
    fields = body_fields(form, "application/x-www-form-urlencoded", "type=target")
    assert fields == {"text": ["A dog.", "A cat."], "target_lang": "EN-GB", "auth_key": "k", "type": "target"}
    request = parse_translate(fields)
    assert (request.texts, request.target, request.source) == (["A dog.", "A cat."], "en", None)
    assert body_fields(b"", "", "type=source") == {"type": "source"}
    assert parse_translate({"text": "x", "target_lang": "pt-BR", "split_sentences": "0"}).split is False
    for body, content_type in ((b"\x00\xff", "application/octet-stream"), (b"[1]", "application/json")):
        with pytest.raises(RequestError) as refused:
            body_fields(body, content_type, "")
        assert refused.value.status == 400
    for fields, named in (
        ({"target_lang": "DE"}, "text"),
        ({"text": ["a"], "target_lang": "DE", "formality": "less"}, "formality"),
        ({"text": ["a"], "target_lang": "DE", "glossary_id": "g"}, "source_lang"),
        ({"text": ["a"], "target_lang": "12"}, "target_lang"),
    ):
        with pytest.raises(RequestError, match=named):
            parse_translate(fields)


def test_languages_list_deepls_regional_targets_without_formality() -> None:
    names = {"en": "English", "de": "German", "pt": "Portuguese"}.__getitem__
    assert languages_answer(["de", "en"], "source", names) == [
        {"language": "DE", "name": "German"},
        {"language": "EN", "name": "English"},
    ]
    targets = languages_answer(["de", "en", "pt"], "target", names)
    assert [t["language"] for t in targets] == ["DE", "EN-GB", "EN-US", "PT-BR", "PT-PT"]
    assert {t["supports_formality"] for t in targets} == {False} and targets[1]["name"] == "English (GB)"
    assert parse_translate({"text": ["x"], "target_lang": "en-us", "source_lang": "DE"}).target == "en"


def test_glossary_entries_as_tsv_and_csv() -> None:
    assert glossary_entries("dog\tHund\n\ncat\tKatze\n", "tsv") == [("dog", "Hund"), ("cat", "Katze")]
    assert glossary_entries('dog,Hund,en,de\n"a, b",c\n', "csv") == [("dog", "Hund"), ("a, b", "c")]
    for text, message in (("dog Hund", "entries:1"), ("dog\tHund\ndog\tHündchen", "twice"), ("\n\n", "no entry")):
        with pytest.raises(RequestError, match=message):
            glossary_entries(text, "tsv")


def create(port: int, name: str) -> requests.Response:
    body = {"name": name, "source_lang": "EN", "target_lang": "DE", "entries": "dog\tHund\nman\tMann",
            "entries_format": "tsv"}  # fmt: skip
    return requests.post(f"http://127.0.0.1:{port}/v2/glossaries", json=body, timeout=60)


def names(port: int) -> list[str]:
    answer = requests.get(f"http://127.0.0.1:{port}/v2/glossaries", timeout=60)
    return [glossary["name"] for glossary in answer.json()["glossaries"]]


def test_glossaries_survive_a_restart_and_a_kill_in_the_middle_of_a_create(
    overfit_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every create pauses 1.5 s inside its transaction: the first is let finish, the second's server is killed
    with SIGKILL half-way; restarted on the same file, the server lists the first glossary, whole, and no other."""
    state = str(tmp_path / "state.sqlite3")
    monkeypatch.setenv("MTKIT_FAULTS", "state_write_pause_ms=1500")
    first = Server(overfit_run, tmp_path / "first.log", "--state", state)
    monkeypatch.delenv("MTKIT_FAULTS")
    try:
        assert create(first.port, "kept").status_code == 201
        outcome: list[object] = []

        def torn() -> None:
            try:
                outcome.append(create(first.port, "torn").status_code)
            except requests.ConnectionError as exc:
                outcome.append(exc)

        killed = threading.Thread(target=torn)
        killed.start()
        time.sleep(0.8)  # the second create is inside its transaction
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=60)
        killed.join(timeout=60)
        assert len(outcome) == 1 and isinstance(outcome[0], requests.ConnectionError), outcome  # never answered
    finally:
        first.stop()
    second = Server(overfit_run, tmp_path / "second.log", "--state", state)
    try:
        assert names(second.port) == ["kept"]
        (glossary,) = requests.get(f"http://127.0.0.1:{second.port}/v2/glossaries", timeout=60).json()["glossaries"]
        entries = requests.get(
            f"http://127.0.0.1:{second.port}/v2/glossaries/{glossary['glossary_id']}/entries", timeout=60
        )
        assert glossary["entry_count"] == 2 and entries.text == "dog\tHund\nman\tMann\n"
        assert create(second.port, "after").status_code == 201 and names(second.port) == ["kept", "after"]
    finally:
        second.stop()
