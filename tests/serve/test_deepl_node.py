"""DeepL's Node SDK (deepl-node 1.28.0, from npm, unmodified) against a real `mtkit serve` process on 127.0.0.1:
tests/serve/deepl_node_checks.mjs calls every public method of it the server answers (v2 text, languages, glossaries,
documents, usage and the SDK's error classes; v3 multilingual glossaries and translation memories) and prints each
check's outcome; each test here asserts one part of them against the server's own answers. Skipped without node and
npm, or when the SDK cannot be installed (no registry)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import requests

from mtkit.memory.tmx import TmxReader
from tests.serve.conftest import PAIRS, deepl_server, tmx
from tests.serve.test_app import Server

# Checked on import: pytest builds the model the server loads (shared by every module) before this module's fixtures.
for _tool in ("node", "npm"):
    if shutil.which(_tool) is None:
        pytest.skip(f"{_tool} is not installed: DeepL's Node SDK cannot be run", allow_module_level=True)

SDK = "deepl-node@1.28.0"
CHECKS = Path(__file__).with_name("deepl_node_checks.mjs")
KEY, OTHER_KEY, QUOTA_KEY = "node-key:fx", "node-other-key", "node-quota-key"
QUOTA = 40  # characters QUOTA_KEY may have translated
POLLED = ("document_report.txt", "document_page.html", "memory_import", "memory_export")  # the SDK polls these
POLL_S = 5  # the SDK's wait before polling again, which a check of POLLED must never need
TEXT = "A man is sleeping. Two dogs play in the snow.\n\nA woman reads a book.\n"
HTML = "<html><body><h1>A dog runs.</h1><p>A man is <b>sleeping</b>.</p></body></html>\n"


@pytest.fixture(scope="module")
def sdk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder deepl-node is installed in (npm's cache makes a second install quick)."""
    folder = tmp_path_factory.mktemp("deepl-node")
    command = ["npm", "install", "--no-audit", "--no-fund", "--prefer-offline", "--no-save", SDK]
    try:
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm install {SDK} took over 120 s (no registry?)")
    if done.returncode != 0:
        pytest.skip(f"npm install {SDK} failed: {done.stderr.strip().splitlines()[-1:]}")
    return folder


@pytest.fixture(scope="module")
def server(overfit_run: Path, tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("serve-deepl-node")
    started = deepl_server(overfit_run, folder, [KEY, OTHER_KEY, QUOTA_KEY], {QUOTA_KEY: QUOTA})
    yield started
    started.stop()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("deepl-node-files")
    (folder / "report.txt").write_text(TEXT, encoding="utf-8")
    (folder / "page.html").write_text(HTML, encoding="utf-8")
    (folder / "memory.tmx").write_text(tmx(PAIRS), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def node_run(sdk: Path, server: Server, work: Path) -> dict[str, Any]:
    """The script's output: each check's outcome ("results") and time ("seconds")."""
    env = os.environ | {"DEEPL_NODE_DIR": str(sdk), "SERVER_URL": url(server),
                        "KEY": KEY, "OTHER_KEY": OTHER_KEY, "QUOTA_KEY": QUOTA_KEY, "WORK": str(work)}  # fmt: skip
    done = subprocess.run(["node", str(CHECKS)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{done.stderr}\n{server.log.read_text()[-3000:]}"
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def checks(node_run: dict[str, Any]) -> dict[str, Any]:
    """Each check's outcome: its values, or {"error": the class thrown, "message": ...}."""
    return node_run["results"]


def url(server: Server) -> str:
    return f"http://127.0.0.1:{server.port}"


def v2(server: Server, texts: list[str], **fields: str) -> list[dict[str, str]]:
    """The server's own /v2/translate answer, which the SDK's must equal."""
    body = {"text": texts, "target_lang": "DE", **fields}
    answer = requests.post(url(server) + "/v2/translate", json=body, headers={"Authorization": f"DeepL-Auth-Key {KEY}"},
                           timeout=120)  # fmt: skip
    assert answer.status_code == 200, answer.text
    return [
        {"text": t["text"], "detected": t["detected_source_language"].lower()} for t in answer.json()["translations"]
    ]


def passed(checks: dict[str, Any], name: str) -> Any:
    """The check's values; a check that threw fails here, naming it."""
    found = checks[name]
    assert not (isinstance(found, dict) and "error" in found and "message" in found), f"{name}: {found}"
    return found


def refused(found: dict[str, Any], error: str, *words: str) -> None:
    """A call that was to fail threw the SDK's `error`, its message holding `words`."""
    assert found["thrown"] == error, found
    assert all(word in found["said"] for word in words), found


def test_text_one_a_list_detected_and_html(checks: dict[str, Any], server: Server) -> None:
    assert passed(checks, "text_one") == v2(server, ["A man is sleeping."], source_lang="EN")[0]
    assert passed(checks, "text_one")["text"] != "A man is sleeping."
    assert passed(checks, "text_list") == v2(server, ["A dog runs.", "Two dogs play in the snow."], source_lang="EN")
    assert passed(checks, "text_detected") == [v2(server, ["A dog runs."], source_lang="EN")[0] | {"detected": "en"}]
    html = passed(checks, "text_html")
    assert html == v2(server, ["<p>A dog <b>runs</b>.</p>"], source_lang="EN", tag_handling="html")[0]
    assert html["text"].startswith("<p>") and "<b>" in html["text"]


def test_languages_and_glossary_pairs(checks: dict[str, Any]) -> None:
    assert passed(checks, "languages") == {"source": ["en"], "target": [["de", False]]}
    assert passed(checks, "glossary_pairs") == [["en", "de"]]


def test_the_sdks_error_classes(checks: dict[str, Any]) -> None:
    refused(passed(checks, "error_wrong_key"), "AuthorizationError")
    refused(passed(checks, "error_unserved_target"), "DeepLError", "Bad request", "fr")
    quota = passed(checks, "quota")
    refused(quota["over"], "QuotaExceededError")
    assert quota["first"] and (quota["count"], quota["limit"]) == (len("A dog runs."), QUOTA)


def test_a_v2_glossary_is_made_listed_read_used_and_deleted(checks: dict[str, Any]) -> None:
    found = passed(checks, "glossary_v2")
    assert found["listed"] and found["got"] == ["pets", "en", "de", 1, True]
    assert found["read"] == {"dog": "Glossarhund"} and "Glossarhund" in found["used"]
    refused(found["theirs"], "GlossaryNotFoundError")
    refused(found["gone"], "GlossaryNotFoundError")


@pytest.mark.parametrize("name", ["report.txt", "page.html"])
def test_documents_are_translated_as_the_server_translates_them(
    checks: dict[str, Any], server: Server, work: Path, name: str
) -> None:
    found = passed(checks, f"document_{name}")
    assert found["status"] == "done" and found["done"] and 0 < found["billed"] <= len((work / name).read_text())
    with open(work / name, "rb") as upload:  # the LibreTranslate endpoint's translation of the same file
        made = requests.post(url(server) + "/translate_file", files={"file": upload}, timeout=120,
                             data={"source": "en", "target": "de", "api_key": KEY})  # fmt: skip
    expected = requests.get(made.json()["translatedFileUrl"], timeout=60).content
    assert (work / f"de-{name}").read_bytes() == expected != (work / name).read_bytes()


def test_a_multilingual_glossary_is_made_listed_and_read(checks: dict[str, Any]) -> None:
    made = passed(checks, "v3_glossary_create")
    assert (made["name"], made["dictionaries"]) == ("pets", [["en", "de", 2]])
    found = passed(checks, "v3_glossary_list_get")
    assert found["listed"] == [made] and found["got"] == made
    refused(found["theirs"], "GlossaryNotFoundError")
    assert passed(checks, "v3_glossary_entries") == {"dog": "Hund", "cat": "Katze"}


def test_a_multilingual_dictionary_is_merged_into_replaced_and_renamed(checks: dict[str, Any]) -> None:
    patched = passed(checks, "v3_glossary_update_dictionary")
    assert (patched["info"]["name"], patched["info"]["dictionaries"]) == ("pets", [["en", "de", 3]])
    assert patched["entries"] == {"dog": "Glossarhund", "cat": "Katze", "snow": "Glossarschnee"}
    assert "Glossarhund" in patched["used"] and "Glossarschnee" in patched["used"]
    replaced = passed(checks, "v3_glossary_replace_dictionary")
    assert replaced == {"info": ["en", "de", 1], "entries": {"snow": "Schneeglossar"}}
    renamed = passed(checks, "v3_glossary_rename")
    assert (renamed["info"]["name"], renamed["info"]["dictionaries"], renamed["got"]) == (
        "animals",
        [["en", "de", 1]],
        "animals",
    )


def test_glossaries_are_made_merged_into_and_replaced_from_csv(checks: dict[str, Any]) -> None:
    found = passed(checks, "glossaries_from_csv")
    assert (found["v2"], found["v3"], found["updated"]) == (2, [["en", "de", 1]], [["en", "de", 2]])
    assert (found["replaced"], found["entries"]) == (1, {"snow": "Schnee"})
    refused(found["v2Gone"], "GlossaryNotFoundError")


def test_a_multilingual_dictionary_and_glossary_are_deleted(checks: dict[str, Any]) -> None:
    refused(passed(checks, "v3_glossary_delete_dictionary")["gone"], "GlossaryNotFoundError")
    deleted = passed(checks, "v3_glossary_delete")
    refused(deleted["gone"], "GlossaryNotFoundError")
    assert deleted["listed"] == []


def test_a_memory_is_imported_listed_and_paged(checks: dict[str, Any]) -> None:
    job = passed(checks, "memory_import")
    assert (job["operation"], job["status"], job["skipped"]) == ("import", "completed", 0)
    found = passed(checks, "memory_list_get")
    info = found["got"]
    assert (info["name"], info["source"], info["targets"], info["segments"], info["created"]) == (
        "pets", "en", ["de"], 5, True
    )  # fmt: skip
    assert found["listed"] == [info]
    refused(found["theirs"], "DeepLError", "Not found")
    segments = passed(checks, "memory_segments")
    assert [len(page) for page in segments["pages"]] == [2, 2, 1]
    assert [tuple(s) for page in segments["pages"] for s in page] == [(s, t, "de") for s, t in PAIRS]
    assert segments["filtered"] == [PAIRS[1][0], PAIRS[2][0]] and segments["cased"] == [PAIRS[2][0]]
    assert segments["count"] == 5


def test_a_memory_answers_exact_matches_and_is_exported_and_deleted(
    checks: dict[str, Any], server: Server, work: Path
) -> None:
    used = passed(checks, "memory_translate")
    assert used["exact"] == used["exactAt75"] == PAIRS[0][1]
    # A fuzzy match (case differs) is reported, not used: the model translates the sentence.
    assert used["fuzzy"] == v2(server, ["a man is sleeping."], source_lang="EN")[0]["text"] != PAIRS[0][1]
    refused(used["theirs"], "DeepLError")
    exported = passed(checks, "memory_export")
    assert (exported["operation"], exported["status"]) == ("export", "completed")
    with open(work / "exported.tmx", "rb") as stream:
        assert list(TmxReader(stream, "exported.tmx")) == PAIRS
    deleted = passed(checks, "memory_delete")
    refused(deleted["gone"], "DeepLError", "Not found")
    assert deleted["listed"] == []


def test_documents_and_memory_jobs_are_done_at_the_sdks_first_poll(node_run: dict[str, Any]) -> None:
    slow = {name: node_run["seconds"][name] for name in POLLED if node_run["seconds"][name] >= POLL_S}
    assert not slow, f"polled again after {POLL_S} s: {slow}"
