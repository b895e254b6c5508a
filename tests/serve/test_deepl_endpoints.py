"""`mtkit serve` as a DeepL API server, tested as its clients call it: a real server process on 127.0.0.1 and DeepL's
own, unmodified Python SDK (deepl), and the request bodies Weblate's machinery and Subtitle Edit send, built as
their source builds them; hostile bodies each a 4xx in DeepL's shape ({"message": ...}), the server still answering.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import requests

from tests.serve.test_app import Server

deepl = pytest.importorskip("deepl")
docx = pytest.importorskip("docx")

KEY, OTHER_KEY, QUOTA_KEY = "deepl-key:fx", "another-key", "quota-key"
QUOTA = 40  # characters QUOTA_KEY may have translated
TEXT = "A man is sleeping. Two dogs play in the snow.\n\nA woman reads a book.\n"


@pytest.fixture(scope="module")
def server(overfit_run: Path, tmp_path_factory: pytest.TempPathFactory):
    """One en->de model, three keys (one with a character limit), its state in a temporary folder."""
    folder = tmp_path_factory.mktemp("serve-deepl")
    (folder / "keys").write_text(f"{KEY}\n{OTHER_KEY}\n{QUOTA_KEY}\n", encoding="utf-8")
    (folder / "limits").write_text(f"{QUOTA_KEY} {QUOTA}\n", encoding="utf-8")
    options = ("--api-keys", str(folder / "keys"), "--character-limits", str(folder / "limits"))
    started = Server(overfit_run, folder / "stderr.log", *options, "--state", str(folder / "state.sqlite3"))
    yield started
    started.stop()


def url(server: Server) -> str:
    return f"http://127.0.0.1:{server.port}"


def translator(server: Server, key: str = KEY) -> Any:
    return deepl.Translator(key, server_url=url(server))


def post(server: Server, path: str, key: str | None = KEY, **kwargs: Any) -> requests.Response:
    headers = {"Authorization": f"DeepL-Auth-Key {key}"} if key else {}
    return requests.post(url(server) + path, headers=headers | kwargs.pop("headers", {}), timeout=120, **kwargs)


def libre_translation(server: Server, text: str) -> str:
    body = {"q": text, "source": "en", "target": "de", "api_key": KEY}
    answer = requests.post(url(server) + "/translate", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()["translatedText"]


def test_the_sdk_translates_one_and_a_list_detects_and_keeps_html(server: Server) -> None:
    client = translator(server)
    one = client.translate_text("A man is sleeping.", source_lang="EN", target_lang="DE")
    assert one.text == libre_translation(server, "A man is sleeping.") and one.text
    assert one.detected_source_lang == "EN" and one.billed_characters == len("A man is sleeping.")
    several = client.translate_text(["A dog runs.", TEXT], target_lang="de")  # source detected
    assert [r.text for r in several] == [libre_translation(server, "A dog runs."), libre_translation(server, TEXT)]
    assert [r.detected_source_lang for r in several] == ["EN", "EN"]
    marked = client.translate_text(
        "<p>A man is <b>sleeping</b>.</p><p>A dog runs.</p>", target_lang="DE", tag_handling="html"
    )
    assert marked.text.startswith("<p>") and marked.text.count("<b>") == 1 and marked.text.endswith("</p>")
    assert "A dog runs" not in marked.text


def test_the_sdk_lists_languages_and_the_pairs_glossaries_take(server: Server) -> None:
    client = translator(server)
    assert [(lang.code, lang.name) for lang in client.get_source_languages()] == [("EN", "English")]
    targets = client.get_target_languages()
    assert [(lang.code, lang.supports_formality) for lang in targets] == [("DE", False)]
    assert [(p.source_lang, p.target_lang) for p in client.get_glossary_languages()] == [("en", "de")]


def test_a_glossary_is_made_listed_used_read_back_and_deleted(server: Server, tmp_path: Path) -> None:
    client = translator(server)
    glossary = client.create_glossary("pets", "EN", "DE", {"dog": "Glossarhund", "snow": "Glossarschnee"})
    assert (glossary.entry_count, glossary.source_lang, glossary.target_lang) == (2, "EN", "DE")
    assert glossary.glossary_id in [g.glossary_id for g in client.list_glossaries()]
    assert client.get_glossary(glossary.glossary_id).name == "pets"
    used = client.translate_text("A dog runs in the snow.", source_lang="EN", target_lang="DE", glossary=glossary)
    assert "Glossarhund" in used.text and "Glossarschnee" in used.text
    assert client.get_glossary_entries(glossary) == {"dog": "Glossarhund", "snow": "Glossarschnee"}
    (tmp_path / "pets.txt").write_text("A dog runs.\n", encoding="utf-8")
    client.translate_document_from_filepath(
        tmp_path / "pets.txt", tmp_path / "pets.de.txt", source_lang="EN", target_lang="DE", glossary=glossary
    )
    assert "Glossarhund" in (tmp_path / "pets.de.txt").read_text(encoding="utf-8")
    client.delete_glossary(glossary)
    assert glossary.glossary_id not in [g.glossary_id for g in client.list_glossaries()]
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_glossary(glossary.glossary_id)


def test_another_key_can_neither_read_use_nor_delete_a_glossary(server: Server) -> None:
    glossary = translator(server).create_glossary("mine", "EN", "DE", {"man": "Mann"})
    gid = glossary.glossary_id
    other = {"Authorization": f"DeepL-Auth-Key {OTHER_KEY}"}
    for method, path in (("GET", f"/v2/glossaries/{gid}"), ("GET", f"/v2/glossaries/{gid}/entries"),
                         ("DELETE", f"/v2/glossaries/{gid}")):  # fmt: skip
        answer = requests.request(method, url(server) + path, headers=other, timeout=60)
        assert answer.status_code == 404 and answer.json() == {"message": "Glossary not found"}, answer.text
    used = post(
        server,
        "/v2/translate",
        OTHER_KEY,
        json={"text": ["A man."], "source_lang": "EN", "target_lang": "DE", "glossary_id": gid},
    )
    assert used.status_code == 404
    assert gid not in [g.glossary_id for g in translator(server, OTHER_KEY).list_glossaries()]
    assert translator(server).get_glossary(gid).name == "mine"


@pytest.mark.parametrize("suffix", [".txt", ".docx"])
def test_documents_go_through_translate_document_from_filepath(server: Server, tmp_path: Path, suffix: str) -> None:
    source, out = tmp_path / f"report{suffix}", tmp_path / f"report.de{suffix}"
    if suffix == ".txt":
        source.write_text(TEXT, encoding="utf-8")
    else:
        document = docx.Document()
        document.add_paragraph("A man in a red shirt is ").add_run("climbing").bold = True
        document.add_paragraph("A dog runs.")
        document.save(source)
    translator(server).translate_document_from_filepath(source, out, target_lang="DE")
    with open(source, "rb") as upload:  # the LibreTranslate endpoint's translation of the same file, for comparison
        made = requests.post(
            url(server) + "/translate_file",
            files={"file": upload},
            timeout=120,
            data={"source": "en", "target": "de", "api_key": KEY},
        )
    expected = requests.get(made.json()["translatedFileUrl"], timeout=60).content
    if suffix == ".txt":
        assert out.read_bytes() == expected and out.read_text(encoding="utf-8") != TEXT
    else:
        texts = [p.text for p in docx.Document(str(out)).paragraphs]
        assert texts == [p.text for p in docx.Document(io.BytesIO(expected)).paragraphs]
        assert texts[1] and texts[1] != "A dog runs."


def test_a_wrong_key_an_unserved_target_and_a_quota_are_the_sdks_exceptions(server: Server) -> None:
    with pytest.raises(deepl.AuthorizationException):
        translator(server, "not-a-key").translate_text("A dog runs.", target_lang="DE")
    with pytest.raises(deepl.DeepLException) as unserved:
        translator(server).translate_text("A dog runs.", source_lang="EN", target_lang="FR")
    assert unserved.value.http_status_code == 400 and "fr" in str(unserved.value)
    limited = translator(server, QUOTA_KEY)
    limited.translate_text("A dog runs.", target_lang="DE")
    usage = limited.get_usage().character
    assert (usage.count, usage.limit) == (len("A dog runs."), QUOTA)
    with pytest.raises(deepl.QuotaExceededException):
        limited.translate_text("Two dogs play in the snow. A man sleeps.", target_lang="DE")
    assert limited.get_usage().character.count == len("A dog runs.")


def test_formality_and_options_are_answered_as_for_a_language_without_them(server: Server) -> None:
    client = translator(server)
    quiet = client.translate_text(
        "A dog runs.",
        target_lang="DE",
        formality="prefer_more",
        context="pets",
        split_sentences="nonewlines",
        preserve_formatting=True,
        model_type="latency_optimized",
    )
    assert quiet.text == libre_translation(server, "A dog runs.")
    with pytest.raises(deepl.DeepLException) as refused:
        client.translate_text("A dog runs.", target_lang="DE", formality="more")
    assert refused.value.http_status_code == 400 and "formality" in str(refused.value)


def glossary_tsv(entries: dict[str, str]) -> str:
    return "\n".join(f"{source}\t{target}" for source, target in entries.items())


def test_weblates_requests(server: Server) -> None:
    """As weblate/machinery/deepl.py sends them: languages by query, its glossary by name, then JSON translate with
    tag_handling xml and its placeables as <x id=".."></x> in ignore_tags."""
    headers = {"Authorization": f"DeepL-Auth-Key {KEY}"}
    sources = requests.get(url(server) + "/v2/languages", params={"type": "source"}, headers=headers, timeout=60)
    targets = requests.get(url(server) + "/v2/languages", params={"type": "target"}, headers=headers, timeout=60)
    assert [item["language"] for item in sources.json()] == ["EN"]
    assert [item["language"] for item in targets.json()] == ["DE"]
    made = post(
        server,
        "/v2/glossaries",
        json={
            "name": "weblate:1:EN:DE:9f2c",
            "source_lang": "en",
            "target_lang": "de",
            "entries": glossary_tsv({"dog": "Webhund"}),
            "entries_format": "tsv",
        },
    )
    assert made.status_code == 201, made.text
    listed = requests.get(url(server) + "/v2/glossaries", headers=headers, timeout=60).json()["glossaries"]
    glossary_id = next(g["glossary_id"] for g in listed if g["name"] == "weblate:1:EN:DE:9f2c")
    body = {"text": ['A dog runs <x id="7"></x> in the snow.'], "source_lang": "EN", "target_lang": "DE",
            "formality": "default", "tag_handling": "xml", "ignore_tags": ["x"], "glossary_id": glossary_id,
            "context": "Button label"}  # fmt: skip
    answer = post(server, "/v2/translate", json=body)
    assert answer.status_code == 200, answer.text
    (translation,) = answer.json()["translations"]
    assert translation["detected_source_language"] == "EN" and '<x id="7"></x>' in translation["text"]
    assert "Webhund" in translation["text"] and "translate=" not in translation["text"]
    assert (
        requests.delete(url(server) + f"/v2/glossaries/{glossary_id}", headers=headers, timeout=60).status_code == 204
    )


def test_subtitle_edits_form_posts(server: Server) -> None:
    """Subtitle Edit posts a form per cue (FormUrlEncodedContent): text, target_lang, source_lang, formality, its key
    in the header; older clients send auth_key in the form and repeat text."""
    cue = "A man is sleeping.\nA dog runs."
    form = {"text": cue, "target_lang": "DE", "source_lang": "EN", "formality": "default"}
    answer = post(server, "/v2/translate", data=form)
    assert answer.status_code == 200, answer.text
    assert answer.json()["translations"][0]["text"] == libre_translation(server, cue)
    older = urlencode(
        [("auth_key", KEY), ("text", "A dog runs."), ("text", "A man is sleeping."), ("target_lang", "de")]
    )
    answer = post(
        server, "/v2/translate", None, data=older, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert answer.status_code == 200, answer.text
    assert [t["text"] for t in answer.json()["translations"]] == [
        libre_translation(server, "A dog runs."),
        libre_translation(server, "A man is sleeping."),
    ]


def test_hostile_bodies_are_4xx_in_deepls_shape_and_the_server_goes_on(server: Server) -> None:
    many = "\n".join(f"word{i}\tWort{i}" for i in range(100_000))
    cases = [
        ("/v2/glossaries", {"data": b"x" * (50 << 20), "headers": {"Content-Type": "application/json"}}, 413),
        (
            "/v2/glossaries",
            {
                "json": {
                    "name": "big",
                    "source_lang": "EN",
                    "target_lang": "DE",
                    "entries": many,
                    "entries_format": "tsv",
                }
            },
            400,
        ),  # fmt: skip
        (
            "/v2/glossaries",
            {
                "json": {
                    "name": "bad",
                    "source_lang": "EN",
                    "target_lang": "DE",
                    "entries": "dog Hund\ncat\tKatze",
                    "entries_format": "tsv",
                }
            },
            400,
        ),  # fmt: skip
        (
            "/v2/translate",
            {"data": b"\x00\xff\xfe binary", "headers": {"Content-Type": "application/octet-stream"}},
            400,
        ),
        ("/v2/translate", {"json": {"text": ["a"] * 51, "target_lang": "DE"}}, 400),
        ("/v2/translate", {"json": {"text": ["a"], "target_lang": "DE", "tag_handling": "pdf"}}, 400),
        ("/v2/translate", {"json": {"text": ["a"], "target_lang": "DE", "split_sentences": "2"}}, 400),
        ("/v2/document/nope", {"json": {"document_key": "x"}}, 404),
        ("/v2/nowhere", {"json": {}}, 404),
    ]
    for path, kwargs, status in cases:
        answer = post(server, path, **kwargs)
        assert answer.status_code == status, (path, answer.text[:200])
        assert set(answer.json()) == {"message"} and answer.json()["message"], answer.text
    assert "entries:1" in post(server, "/v2/glossaries", json=cases[2][1]["json"]).json()["message"]
    assert [g.name for g in translator(server).list_glossaries() if g.name in ("big", "bad")] == []
    assert translator(server).translate_text("A dog runs.", target_lang="DE").text


def test_usage_counts_each_keys_characters(server: Server) -> None:
    before = json.loads(requests.get(url(server) + "/v2/usage", headers={"Authorization": f"DeepL-Auth-Key {KEY}"},
                                     timeout=60).text)["character_count"]  # fmt: skip
    translator(server).translate_text(["A dog runs.", "A man."], target_lang="DE")
    assert translator(server).get_usage().character.count == before + len("A dog runs.") + len("A man.")
    assert translator(server).get_usage().character.limit is None  # no limit set for this key
