"""Translation memories served (a real `mtkit serve` process on 127.0.0.1, one en->de model): a memory imported on
the command line into the server's --state is used by mtkit's POST /translate ("memory") and by DeepL's own Python
SDK (translation_memory, its threshold): sentences it holds answered with its target, placeholders the request's
own, fuzzy matches reported per sentence; DeepL's `context` accepted and said to be unused; bad fields a 4xx."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import run_mtkit_in_process
from tests.serve.test_app import Server

deepl = pytest.importorskip("deepl")

PAIRS = [
    ("A man is sleeping.", "Gespeicherte Übersetzung: Ein Mann schläft."),
    ("Delete {count} files.", "{count} Dateien löschen."),
    ("Two dogs play in the snow.", "Zwei Hunde spielen im Schnee."),
]


@pytest.fixture(scope="module")
def server(overfit_run: Path, tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("serve-memory")
    (folder / "m.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in PAIRS), encoding="utf-8")
    state = folder / "state.sqlite3"
    imported = run_mtkit_in_process(
        "memory", "import", folder / "m.tsv", "--name", "pets", "--source-lang", "en", "--target-lang", "de",
        "--state", state,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stdout
    started = Server(overfit_run, folder / "stderr.log", "--state", str(state))
    yield started
    started.stop()


def url(server: Server) -> str:
    return f"http://127.0.0.1:{server.port}"


def translate(server: Server, **body: Any) -> requests.Response:
    return requests.post(url(server) + "/translate", json=body, timeout=120)


def test_mtkits_api_answers_exact_matches_and_reports_fuzzy_ones(server: Server) -> None:
    text = "A man is sleeping. Delete {n} files. Two dogs play in the park."
    plain = translate(server, text=[text]).json()
    answer = translate(server, text=[text], memory="pets", memory_threshold=60)
    assert answer.status_code == 200, answer.text
    exact, placeholder, fuzzy = answer.json()["sentences"][0]
    assert exact["translation"] == PAIRS[0][1] and exact["memory"]["score"] == 100
    assert placeholder["translation"] == "{n} Dateien löschen." and placeholder["memory"]["target"] == PAIRS[1][1]
    assert 60 <= fuzzy["memory"]["score"] < 100 and fuzzy["memory"]["source"] == PAIRS[2][0]
    assert fuzzy["translation"] == plain["sentences"][0][2]["translation"]  # the model's, as without a memory
    assert "memory" not in plain["sentences"][0][0]
    high = translate(server, text=["Two dogs play in the park."], memory="pets", memory_threshold=99).json()
    assert "memory" not in high["sentences"][0][0]


def test_mtkits_api_refuses_an_unknown_memory_and_a_bad_threshold(server: Server) -> None:
    assert translate(server, text=["A dog."], memory="nope").status_code == 404
    assert translate(server, text=["A dog."], memory="pets", memory_threshold=101).status_code == 422


def test_deepls_sdk_translates_with_the_memory_and_is_told_context_is_unused(server: Server) -> None:
    client = deepl.Translator("any-key", server_url=url(server))
    used = client.translate_text(
        ["A man is sleeping.", "Two dogs play in the park."], source_lang="EN", target_lang="DE",
        translation_memory="pets", translation_memory_threshold=80,
    )  # fmt: skip
    assert used[0].text == PAIRS[0][1]
    without = client.translate_text("A man is sleeping.", source_lang="EN", target_lang="DE")
    assert without.text != PAIRS[0][1]
    body = {"text": ["A man is sleeping."], "target_lang": "DE", "context": "A bedroom.", "source_lang": "EN"}
    answer = requests.post(url(server) + "/v2/translate", json=body, timeout=120).json()
    assert answer["warnings"] == ["context: not used; mtkit's models translate each sentence alone"]
    too_high = body | {"translation_memory_id": "pets", "translation_memory_threshold": 200}
    bad = requests.post(url(server) + "/v2/translate", json=too_high, timeout=60)
    assert bad.status_code == 400 and "translation_memory_threshold" in bad.json()["message"]
    missing = requests.post(url(server) + "/v2/translate", json=body | {"translation_memory_id": "x"}, timeout=60)
    assert missing.status_code == 404


def test_deepls_document_translation_uses_the_memory(server: Server, tmp_path: Path) -> None:
    client = deepl.Translator("any-key", server_url=url(server))
    (tmp_path / "in.txt").write_text("A man is sleeping.\n", encoding="utf-8")
    client.translate_document_from_filepath(
        tmp_path / "in.txt", tmp_path / "out.txt", source_lang="EN", target_lang="DE", translation_memory="pets"
    )
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").strip() == PAIRS[0][1]
