"""DeepL's /v3/ endpoints on a real `mtkit serve` process on 127.0.0.1 (one en->de model, two keys), driven by
DeepL's own Python SDK, unmodified: a TMX imported through the SDK's import job (the upload to this server, the
job done at its first poll), listed, read, paged by cursor with filter_text, used by translate_text, exported and
deleted; a multilingual glossary made, listed, read, renamed, merged into, replaced, used and deleted; each the key's
own; bad requests 4xx."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from mtkit.errors import UserError
from mtkit.memory.tmx import TmxReader
from mtkit.serve import deepl_memories
from mtkit.serve.deepl_memories import DeepLMemories, MemoryJob
from tests.serve.conftest import PAIRS, deepl_server, tmx
from tests.serve.test_app import Server

deepl = pytest.importorskip("deepl")
Entries = pytest.importorskip("deepl.api_data").MultilingualGlossaryDictionaryEntries  # one language pair's

KEY, OTHER_KEY = "v3-key:fx", "v3-other-key"


@pytest.fixture(scope="module")
def server(overfit_run: Path, tmp_path_factory: pytest.TempPathFactory):
    started = deepl_server(overfit_run, tmp_path_factory.mktemp("serve-deepl-v3"), [KEY, OTHER_KEY])
    yield started
    started.stop()


def url(server: Server) -> str:
    return f"http://127.0.0.1:{server.port}"


def client(server: Server, key: str = KEY) -> Any:
    return deepl.DeepLClient(key, server_url=url(server))


def call(server: Server, method: str, path: str, key: str | None = KEY, **kwargs: Any) -> requests.Response:
    headers = {"Authorization": f"DeepL-Auth-Key {key}"} if key else {}
    return requests.request(method, url(server) + path, headers=headers, timeout=120, **kwargs)


def imported(server: Server, folder: Path, name: str) -> str:
    (folder / f"{name}.tmx").write_text(tmx(PAIRS), encoding="utf-8")
    started = time.monotonic()
    job = client(server).import_translation_memory_from_filepath(folder / f"{name}.tmx", display_name=name)
    assert time.monotonic() - started < 5  # done at the first poll: the SDK polls again only after 5 s
    assert job.ok and job.operation == "import" and job.result.skipped_segment_count == 0
    return job.result.translation_memory_id


def test_a_memory_is_imported_listed_paged_used_exported_and_deleted(server: Server, tmp_path: Path) -> None:
    sdk = client(server)
    memory_id = imported(server, tmp_path, "pets")
    listed = {tm.translation_memory_id: tm for tm in sdk.list_translation_memories()}
    info = listed[memory_id]
    assert (info.name, info.source_language, info.target_languages, info.segment_count) == ("pets", "en", ["de"], 5)
    assert sdk.get_translation_memory(memory_id).creation_time is not None
    sources, cursor = [], None
    while True:
        page = sdk.list_translation_memory_segments(memory_id, page_size=2, page_cursor=cursor)
        assert len(page) <= 2 and page.segment_count == 5
        sources += [(s.source_text, s.targets[0].target_text, s.targets[0].target_language) for s in page]
        cursor = page.next_page_cursor
        if cursor is None:
            break
    assert sources == [(s, t, "de") for s, t in PAIRS]
    dogs = sdk.list_translation_memory_segments(memory_id, filter_text="dog")
    assert [s.source_text for s in dogs] == [PAIRS[1][0], PAIRS[2][0]] and dogs.next_page_cursor is None
    exact = sdk.list_translation_memory_segments(memory_id, filter_text="DOG", filter_case_sensitive=True)
    assert [s.source_text for s in exact] == [PAIRS[2][0]]
    translated = sdk.translate_text(PAIRS[0][0], source_lang="EN", target_lang="DE", translation_memory=memory_id)
    assert translated.text == PAIRS[0][1]
    sdk.export_translation_memory_to_filepath(memory_id, tmp_path / "out.tmx")
    with open(tmp_path / "out.tmx", "rb") as stream:
        assert list(TmxReader(stream, "out.tmx")) == PAIRS
    sdk.delete_translation_memory(memory_id)
    assert memory_id not in [tm.translation_memory_id for tm in sdk.list_translation_memories()]
    with pytest.raises(deepl.DeepLException, match="Not found"):
        sdk.get_translation_memory(memory_id)


def test_a_memory_and_its_jobs_are_the_keys_own(server: Server, tmp_path: Path) -> None:
    memory_id = imported(server, tmp_path, "mine")
    other = client(server, OTHER_KEY)
    assert memory_id not in [tm.translation_memory_id for tm in other.list_translation_memories()]
    for method, path in (("GET", ""), ("GET", "/segments"), ("POST", "/export"), ("DELETE", "")):
        answer = call(server, method, f"/v3/translation_memories/{memory_id}{path}", OTHER_KEY)
        assert answer.status_code == 404 and answer.json() == {"message": "Translation memory not found"}
    with pytest.raises(deepl.DeepLException):
        other.translate_text("A man is sleeping.", source_lang="EN", target_lang="DE", translation_memory=memory_id)
    export = client(server).create_translation_memory_export(memory_id)
    assert call(server, "GET", f"/v3/translation_memories/jobs/{export.job_id}", OTHER_KEY).status_code == 404
    assert call(server, "GET", f"/v3/translation_memories/jobs/{export.job_id}").json()["operation"] == "export"
    assert call(server, "GET", "/v3/translation_memories", None).status_code == 403  # the server has --api-keys


def test_a_file_that_is_not_a_memory_fails_its_job_in_one_line(server: Server, tmp_path: Path) -> None:
    bad = '<?xml version="1.0"?><!DOCTYPE tmx [<!ENTITY a "aaaa">]><tmx><body>&a;</body></tmx>'
    (tmp_path / "bad.tmx").write_text(bad, encoding="utf-8")
    with pytest.raises(deepl.DeepLException, match="Error occurred while importing translation memory: bad.tmx"):
        client(server).import_translation_memory_from_filepath(tmp_path / "bad.tmx", timeout_s=30)


def test_bad_requests_are_4xx_in_deepls_shape(server: Server, tmp_path: Path) -> None:
    memory_id = imported(server, tmp_path, "checks")
    segments = f"/v3/translation_memories/{memory_id}/segments"
    queries = ["page_size=0", "page_size=101", "filter_text=a", "page_cursor=nonsense", "filter_case_sensitive=yes"]
    for query in queries:
        field = query.split("=")[0]
        answer = call(server, "GET", f"{segments}?{query}")
        assert answer.status_code == 400 and field in answer.json()["message"], (query, answer.text)
    files = [{"file_name": "m.pdf", "content_length": 10}, {"file_name": "m.tsv", "content_length": 1}]
    for body in ({}, *({"source_file": file} for file in files), {"source_file": {"file_name": "m.tmx"}}):
        answer = call(server, "POST", "/v3/translation_memories/import", json=body)
        assert answer.status_code == 400 and "source_file" in answer.json()["message"], answer.text
    job = client(server).create_translation_memory_import("m.tmx", 5)
    wrong = requests.put(job.upload_url.replace("token=", "token=x"), data=b"12345", timeout=60)
    assert wrong.status_code == 404
    short = requests.put(job.upload_url, data=b"1234", timeout=60)
    assert short.status_code == 400 and "5" in short.json()["message"]
    assert call(server, "GET", "/v3/translation_memories/jobs/nope").status_code == 404
    assert call(server, "GET", "/v3/translation_memories?page_size=26").status_code == 400


def test_a_multilingual_glossary_is_made_listed_used_read_and_deleted(server: Server) -> None:
    sdk = client(server)
    entries = {"dog": "Glossarhund", "snow": "Glossarschnee"}
    made = sdk.create_multilingual_glossary("pets", [Entries("EN", "DE", entries)])
    assert [(d.source_lang, d.target_lang, d.entry_count) for d in made.dictionaries] == [("EN", "DE", 2)]
    assert made.glossary_id in [g.glossary_id for g in sdk.list_multilingual_glossaries()]
    assert made.glossary_id not in [g.glossary_id for g in sdk.list_glossaries()]  # v2 lists its own kind only
    assert sdk.get_multilingual_glossary(made.glossary_id).name == "pets"
    used = sdk.translate_text("A dog runs in the snow.", source_lang="EN", target_lang="DE", glossary=made)
    assert "Glossarhund" in used.text and "Glossarschnee" in used.text
    read = sdk.get_multilingual_glossary_entries(made, "EN", "DE").dictionaries[0]
    assert (read.source_lang, read.target_lang, read.entries) == ("en", "de", "dog\tGlossarhund\nsnow\tGlossarschnee\n")
    assert made.glossary_id not in [g.glossary_id for g in client(server, OTHER_KEY).list_multilingual_glossaries()]
    with pytest.raises(deepl.GlossaryNotFoundException):
        client(server, OTHER_KEY).get_multilingual_glossary(made.glossary_id)
    sdk.delete_multilingual_glossary(made)
    with pytest.raises(deepl.GlossaryNotFoundException):
        sdk.get_multilingual_glossary(made.glossary_id)
    gone = call(server, "POST", "/v2/translate", json={"text": ["A dog."], "source_lang": "EN", "target_lang": "DE",
                                                       "glossary_id": made.glossary_id})  # fmt: skip
    assert gone.status_code == 404


def test_a_multilingual_glossary_is_renamed_its_dictionary_merged_into_and_replaced(server: Server) -> None:
    sdk = client(server)
    made = sdk.create_multilingual_glossary("pets", [Entries("EN", "DE", {"dog": "Hund", "cat": "Katze"})])
    renamed = sdk.update_multilingual_glossary_name(made, "animals")
    assert (renamed.name, renamed.dictionaries[0].entry_count) == ("animals", 2)
    assert sdk.get_multilingual_glossary(made.glossary_id).name == "animals"
    patched = sdk.update_multilingual_glossary_dictionary(
        made, Entries("EN", "DE", {"dog": "Glossarhund", "snow": "Glossarschnee"})
    )
    assert (patched.name, patched.dictionaries[0].entry_count) == ("animals", 3)
    read = sdk.get_multilingual_glossary_entries(made, "EN", "DE").dictionaries[0]
    assert read.entries == "dog\tGlossarhund\ncat\tKatze\nsnow\tGlossarschnee\n"  # dog's target replaced in place
    used = sdk.translate_text("A dog runs in the snow.", source_lang="EN", target_lang="DE", glossary=made)
    assert "Glossarhund" in used.text and "Glossarschnee" in used.text
    replaced = sdk.replace_multilingual_glossary_dictionary(made, Entries("EN", "DE", {"snow": "Schneeglossar"}))
    assert (replaced.source_lang, replaced.target_lang, replaced.entry_count) == ("EN", "DE", 1)
    read = sdk.get_multilingual_glossary_entries(made, "EN", "DE").dictionaries[0]
    assert read.entries == "snow\tSchneeglossar\n"
    assert sdk.get_multilingual_glossary(made.glossary_id).name == "animals"
    with pytest.raises(deepl.GlossaryNotFoundException):
        client(server, OTHER_KEY).update_multilingual_glossary_name(made, "theirs")
    with pytest.raises(deepl.GlossaryNotFoundException):
        client(server, OTHER_KEY).replace_multilingual_glossary_dictionary(made, Entries("EN", "DE", {"a": "b"}))
    with pytest.raises(deepl.DeepLException, match="Unsupported glossary language pair: DE->EN"):
        sdk.update_multilingual_glossary_dictionary(made, Entries("DE", "EN", {"Hund": "dog"}))
    assert call(server, "PATCH", f"/v3/glossaries/{made.glossary_id}", json={}).status_code == 400
    sdk.delete_multilingual_glossary(made)


def test_a_form_sends_dictionaries_as_indexed_fields(server: Server) -> None:
    """DeepL's Node SDK sends `dictionaries[0].source_lang=...` in a form: read as JSON's list of objects."""
    form = {"name": "form", "dictionaries[0].source_lang": "en", "dictionaries[0].target_lang": "de",
            "dictionaries[0].entries": "dog\tHund", "dictionaries[0].entries_format": "tsv"}  # fmt: skip
    made = call(server, "POST", "/v3/glossaries", data=form)
    assert made.status_code == 201 and made.json()["dictionaries"][0]["entry_count"] == 1, made.text
    glossary_id = made.json()["glossary_id"]
    patch = {
        "dictionaries[0].source_lang": "en",
        "dictionaries[0].target_lang": "de",
        "dictionaries[0].entries": "a\tb",
    }
    patched = call(server, "PATCH", f"/v3/glossaries/{glossary_id}", data=patch)
    assert patched.status_code == 200 and patched.json()["dictionaries"][0]["entry_count"] == 2, patched.text
    too_far = call(server, "PATCH", f"/v3/glossaries/{glossary_id}", data={"dictionaries[5000].entries": "a\tb"})
    assert too_far.status_code == 400 and "dictionaries[5000].entries" in too_far.json()["message"]
    assert call(server, "DELETE", f"/v3/glossaries/{glossary_id}").status_code == 204


def test_a_glossary_of_a_pair_not_served_or_a_repeated_pair_is_refused(server: Server) -> None:
    sdk = client(server)
    dictionaries = [Entries("DE", "EN", {"Hund": "dog"})]
    with pytest.raises(deepl.DeepLException, match="Unsupported glossary language pair: DE->EN"):
        sdk.create_multilingual_glossary("back", dictionaries)
    twice = [Entries("EN", "DE", {"dog": "Hund"})] * 2
    with pytest.raises(deepl.DeepLException, match="a second dictionary"):
        sdk.create_multilingual_glossary("twice", twice)
    assert [g.name for g in sdk.list_multilingual_glossaries()] == []
    missing = call(server, "GET", "/v3/glossaries/nope/entries?source_lang=en")
    assert missing.status_code == 400 and missing.json() == {"message": "Parameter 'target_lang' not specified."}


def test_v2_glossaries_still_translate_and_a_dictionary_is_deleted_alone(server: Server) -> None:
    sdk = client(server)
    old = sdk.create_glossary("v2", "EN", "DE", {"dog": "Glossarhund"})
    used = sdk.translate_text("A dog runs.", source_lang="EN", target_lang="DE", glossary=old)
    assert "Glossarhund" in used.text
    assert old.glossary_id not in [g.glossary_id for g in sdk.list_multilingual_glossaries()]
    made = sdk.create_multilingual_glossary("v3", [Entries("EN", "DE", {"dog": "Hund"})])
    body = {"text": ["A dog."], "source_lang": "DE", "target_lang": "EN", "glossary_id": made.glossary_id}
    wrong_pair = call(server, "POST", "/v2/translate", json=body)
    assert wrong_pair.status_code == 400 and wrong_pair.json() == {
        "message": "The glossary has no dictionary for DE->EN"
    }
    path = f"/v3/glossaries/{made.glossary_id}/dictionaries?source_lang=EN&target_lang=DE"
    assert call(server, "DELETE", path, OTHER_KEY).status_code == 404
    assert call(server, "DELETE", path).status_code == 204
    with pytest.raises(deepl.GlossaryNotFoundException):
        sdk.get_multilingual_glossary(made.glossary_id)
    sdk.delete_glossary(old)


def test_a_slow_job_is_answered_early_and_its_status_tells_how_it_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    """An import longer than UPLOAD_WAIT_S is answered while it goes on (the SDK would time out and send the file
    again); the job then reads completed, or failed with the reader's one-line error."""
    monkeypatch.setattr(deepl_memories, "UPLOAD_WAIT_S", 0.05)

    def refused() -> None:
        raise UserError("m.tmx: not TMX")

    async def scenario() -> None:
        memories = DeepLMemories(None)  # type: ignore[arg-type]  # run() needs no store
        slow = MemoryJob("slow", "", "import", "token", 0.0, 1e12, status="processing")
        release = threading.Event()
        await memories.run(slow, lambda: None if release.wait(10) else None)
        assert slow.status == "processing"
        release.set()
        for _ in range(500):
            if slow.status != "processing":
                break
            await asyncio.sleep(0.01)
        assert slow.status == "completed"
        bad = MemoryJob("bad", "", "import", "token", 0.0, 1e12, status="processing")
        await memories.run(bad, refused)
        assert (bad.status, bad.error) == ("failed", "m.tmx: not TMX")

    asyncio.run(scenario())
