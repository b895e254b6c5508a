"""`mtkit serve` as the LibreTranslate backend of the apps people use, tested as they call it: real server
processes on 127.0.0.1 and the real, unmodified client libraries (libretranslatepy, deep-translator), and the
requests Mastodon, Discourse and Nextcloud send, built as their source builds them.
"""

from __future__ import annotations

import html.parser
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import requests
from deep_translator import LibreTranslator
from libretranslatepy import LibreTranslateAPI

from tests.conftest import read_gz_lines, run_mtkit_in_process
from tests.serve.test_app import Server, wait_for

KEY, LIMITED_KEY = "mastodon-instance-key", "tight-key"
MASTODON_POST = (
    '<p>A man is sleeping. <span class="h-card" translate="no"><a href="https://mastodon.social/@alice" '
    'class="u-url mention">@<span>alice</span></a></span> look at <a href="https://example.com/a?b=1&amp;c=2" '
    'target="_blank" rel="nofollow noopener" translate="no"><span class="invisible">https://</span>'
    '<span class="">example.com/a?b=1&amp;c=2</span><span class="invisible"></span></a> \U0001f600</p>'
    '<p>Two dogs &amp; a cat play in the snow. <a href="https://mastodon.social/tags/dogs" class="mention hashtag" '
    'rel="tag">#<span>dogs</span></a></p>'
)


@pytest.fixture(scope="module")
def keyed(overfit_run: Path, tmp_path_factory: pytest.TempPathFactory):
    """One en->de model; two keys, one limited to 3 requests a minute; every request logged."""
    folder = tmp_path_factory.mktemp("serve-keys")
    (folder / "keys").write_text(f"{KEY}\n{LIMITED_KEY} 3\n", encoding="utf-8")
    started = Server(overfit_run, folder / "stderr.log", "--api-keys", str(folder / "keys"), "--access-log")
    yield started
    started.stop()


@pytest.fixture(scope="module")
def pair_server(overfit_run: Path, de_en_run: Path, tmp_path_factory: pytest.TempPathFactory):
    """en->de and de->en in one server, no keys."""
    started = Server(overfit_run, tmp_path_factory.mktemp("serve-two") / "stderr.log", str(de_en_run))
    yield started
    started.stop()


def url(server: Server) -> str:
    return f"http://127.0.0.1:{server.port}"


def cli_translations(run: Path, lines: list[str]) -> list[str]:
    """`mtkit translate RUN` of `lines`, run in this process: the servers are the processes under test here."""
    done = run_mtkit_in_process("translate", run, "--device", "cpu", stdin="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_libretranslatepy_translates_as_the_cli_and_detects_and_lists(
    keyed: Server, overfit_run: Path, multi30k: Path
) -> None:
    lines = read_gz_lines(multi30k / "train.en.gz", 3)
    client = LibreTranslateAPI(url(keyed), api_key=KEY)
    assert [client.translate(line, "en", "de") for line in lines] == cli_translations(overfit_run, lines)
    assert client.detect(lines[0])[0]["language"] == "en"
    assert 0 < client.detect(lines[0])[0]["confidence"] <= 100
    assert client.detect(read_gz_lines(multi30k / "train.de.gz", 1)[0])[0]["language"] == "de"
    assert client.languages() == [
        {"code": "de", "name": "German", "targets": []},
        {"code": "en", "name": "English", "targets": ["de"]},
    ]


def test_deep_translator_sends_everything_in_the_query(keyed: Server, overfit_run: Path, multi30k: Path) -> None:
    line = read_gz_lines(multi30k / "train.en.gz", 1)[0]
    translator = LibreTranslator(source="en", target="de", api_key=KEY, custom_url=url(keyed) + "/")
    assert translator.translate(line) == cli_translations(overfit_run, [line])[0]
    wait_for(lambda: "POST /translate?q=" in keyed.log.read_text())  # logged just after the answer is sent
    assert "api_key=<hidden>" in keyed.log.read_text() and KEY not in keyed.log.read_text()


class Tags(html.parser.HTMLParser):
    """The start and end tags of a document with their attributes, and whether it closes what it opens."""

    def __init__(self, document: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple] = []
        self.open: list[str] = []
        self.balanced = True
        self.feed(document)
        self.close()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(("start", tag, tuple(attrs)))
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self.tags.append(("end", tag))
        self.balanced = self.balanced and bool(self.open) and self.open.pop() == tag


def test_a_mastodon_post_comes_back_well_formed_with_link_mention_hashtag_and_emoji(keyed: Server) -> None:
    # Mastodon asks for the languages with its JSON Content-Type and no body, and reads each code's targets.
    languages = requests.get(url(keyed) + "/languages", headers={"Content-Type": "application/json"}, timeout=60)
    assert languages.status_code == 200 and {item["code"]: item["targets"] for item in languages.json()} == {
        "de": [],
        "en": ["de"],
    }
    body = json.dumps(
        {"q": [MASTODON_POST, "<p>A dog runs.</p>"], "source": "auto", "target": "de", "format": "html", "api_key": KEY}
    )
    status, _, answer = keyed.request("POST", "/translate", body.encode(), {"Content-Type": "application/json"})
    assert status == 200, answer
    translated = answer["translatedText"]
    assert len(translated) == 2
    assert answer["detectedLanguage"][0]["language"] == "en"  # Mastodon reads detectedLanguage[i].language
    source_tags, answer_tags = Tags(MASTODON_POST), Tags(translated[0])
    assert answer_tags.tags == source_tags.tags and answer_tags.balanced and not answer_tags.open
    for kept in (
        '<a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="nofollow noopener" translate="no">'
        '<span class="invisible">https://</span><span class="">example.com/a?b=1&amp;c=2</span>',
        "@<span>alice</span></a></span>",
        "#<span>dogs</span></a>",
        "\U0001f600",
    ):
        assert kept in translated[0]
    assert "A man is sleeping" not in translated[0]  # the text itself was translated
    assert Tags(translated[1]).tags == Tags("<p>A dog runs.</p>").tags


def test_alternatives_come_from_the_n_best_without_repeats(keyed: Server) -> None:
    body = json.dumps(
        {"q": ["A dog runs.", "A man is sleeping."], "source": "en", "target": "de", "alternatives": 3, "api_key": KEY}
    ).encode()
    status, _, answer = keyed.request("POST", "/translate", body, {"Content-Type": "application/json"})
    assert status == 200 and len(answer["alternatives"]) == 2
    for best, others in zip(answer["translatedText"], answer["alternatives"]):
        assert len(others) <= 3 and best not in others and len(set(others)) == len(others)
    assert any(answer["alternatives"])  # a beam of 4 finds other texts for these lines


def test_a_paragraph_is_translated_sentence_by_sentence_with_confidences(
    keyed: Server, overfit_run: Path, multi30k: Path
) -> None:
    """A post of three sentences comes back as the three translated alone, joined by the post's own white space,
    through the real client; the answer's "sentences" carry each one's confidence; split_sentences false does not."""
    lines = [line for line in read_gz_lines(multi30k / "train.en.gz", 20) if line.endswith(".")][:3]
    alone = cli_translations(overfit_run, lines)
    post = f"{lines[0]} {lines[1]}\n\n{lines[2]}"
    client = LibreTranslateAPI(url(keyed), api_key=KEY)
    assert client.translate(post, "en", "de") == f"{alone[0]} {alone[1]}\n\n{alone[2]}"
    body = {"q": post, "source": "en", "target": "de", "api_key": KEY}
    answer = requests.post(url(keyed) + "/translate", json=body, timeout=60).json()
    assert [s["source"] for s in answer["sentences"]] == lines
    assert all(s["confidence"] < 0 for s in answer["sentences"])
    html_post = f"<p>{lines[0]} {lines[1]}\n{lines[2]}</p>"
    answer = requests.post(url(keyed) + "/translate", json={**body, "q": html_post, "format": "html"}, timeout=60)
    # the line break inside <p> is white space between two sentences, not the end of a segment
    assert " ".join(answer.json()["translatedText"].split()) == f"<p>{alone[0]} {alone[1]} {alone[2]}</p>"
    whole = requests.post(url(keyed) + "/translate", data={**body, "split_sentences": "false"}, timeout=60).json()
    assert whole["translatedText"] != f"{alone[0]} {alone[1]}\n\n{alone[2]}" and "sentences" in whole


def test_discourse_detects_then_translates_with_forms(keyed: Server) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    status, _, detected = keyed.request(
        "POST", "/detect", urlencode({"q": "A man is sleeping.", "api_key": KEY}).encode(), form
    )
    assert status == 200 and detected[0]["language"] == "en"
    body = urlencode(
        {"q": "<b>A man</b> is sleeping.", "source": "en", "target": "de", "format": "html", "api_key": KEY}
    )
    status, _, answer = keyed.request("POST", "/translate", body.encode(), form)
    assert status == 200 and isinstance(answer["translatedText"], str)
    assert Tags(answer["translatedText"]).tags == Tags("<b>A man</b> is sleeping.").tags


def test_nextcloud_connects_reads_settings_and_languages_detects_by_query_and_translates_multipart(
    keyed: Server,
) -> None:
    assert requests.post(url(keyed) + "/", timeout=60).status_code == 200  # the client's connection test
    settings = requests.get(url(keyed) + "/frontend/settings", timeout=60).json()
    assert settings["keyRequired"] is True and settings["language"]["source"]["code"] == "auto"
    assert {language["code"] for language in requests.get(url(keyed) + "/languages", timeout=60).json()} == {"en", "de"}
    detected = requests.post(
        url(keyed) + "/detect?" + urlencode({"q": "A dog runs.", "api_key": KEY}), files={}, timeout=60
    )
    assert detected.status_code == 200 and detected.json()[0]["language"] == "en"
    fields = {"q": "A dog runs.", "format": "html", "source": "en", "target": "de", "api_key": KEY}
    answer = requests.post(url(keyed) + "/translate", files={k: (None, v) for k, v in fields.items()}, timeout=60)
    assert answer.status_code == 200 and answer.json()["translatedText"]


def test_keys_403_without_or_with_a_wrong_one_429_over_the_limit_and_languages_need_none(keyed: Server) -> None:
    def translate(**key: str) -> tuple[int, Any]:
        body = json.dumps({"q": "A dog.", "source": "en", "target": "de", **key}).encode()
        status, _, answer = keyed.request("POST", "/translate", body, {"Content-Type": "application/json"})
        return status, answer

    assert translate()[0] == 403 and "error" in translate()[1]
    assert translate(api_key="nope")[0] == 403
    assert (
        keyed.request(
            "POST",
            "/detect",
            urlencode({"q": "A dog."}).encode(),
            {"Content-Type": "application/x-www-form-urlencoded"},
        )[0]
        == 403
    )
    assert keyed.translate({"text": ["A dog."]})[0] == 403  # mtkit's own body too
    assert keyed.translate(["A dog."])[0] == 400  # a JSON body that is no object: 400 before the key is looked at
    assert keyed.translate({"text": ["A dog."], "api_key": KEY})[0] == 200
    assert [translate(api_key=LIMITED_KEY)[0] for _ in range(4)] == [200, 200, 200, 429]
    assert translate(api_key=KEY)[0] == 200  # another key's budget is its own
    assert keyed.request("GET", "/languages")[0] == 200
    assert LIMITED_KEY not in keyed.log.read_text()


def test_two_models_route_by_pair_and_auto_detects_the_source(
    pair_server: Server, overfit_run: Path, de_en_run: Path
) -> None:
    english, german = "A man is sleeping.", "Ein Mann schläft auf einer Bank."
    client = LibreTranslateAPI(url(pair_server))
    assert client.translate(english, "en", "de") == cli_translations(overfit_run, [english])[0]
    assert client.translate(german, "de", "en") == cli_translations(de_en_run, [german])[0]
    assert client.languages() == [
        {"code": "de", "name": "German", "targets": ["en"]},
        {"code": "en", "name": "English", "targets": ["de"]},
    ]
    body = json.dumps({"q": [german, english], "source": "auto", "target": "en"}).encode()
    status, _, answer = pair_server.request("POST", "/translate", body, {"Content-Type": "application/json"})
    assert status == 200 and answer["detectedLanguage"][0]["language"] == "de"
    assert answer["translatedText"][0] == cli_translations(de_en_run, [german])[0]
    status, _, own = pair_server.translate({"text": [german], "source": "de", "target": "en"})
    assert status == 200 and own["translations"] == cli_translations(de_en_run, [german])
    status, _, refused = pair_server.translate({"text": [german]})
    assert status == 400 and "give source and target" in refused["error"]
    status, _, refused = pair_server.request(
        "POST",
        "/translate",
        urlencode({"q": "x", "source": "en", "target": "fr"}).encode(),
        {"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 400 and refused == {"error": "fr is not supported (languages served: de, en)"}
    info = pair_server.request("GET", "/info")[2]
    assert [model["pairs"] for model in info["models"]] == [["en->de"], ["de->en"]]


def test_libretranslate_errors_are_400s_in_its_shape(pair_server: Server) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    status, _, answer = pair_server.request(
        "POST", "/translate", urlencode({"source": "en", "target": "de"}).encode(), form
    )
    assert (status, answer) == (400, {"error": "Invalid request: missing q parameter"})
    status, _, answer = pair_server.request(
        "POST", "/translate", urlencode({"q": "Hi", "source": "en", "target": "de", "format": "md"}).encode(), form
    )
    assert (status, answer) == (400, {"error": "md format is not supported"})
    for body in ({"source": "en", "target": "de"}, {}):  # JSON without q, as LibreTranslate's clients send it
        status, _, answer = pair_server.translate(body)
        assert (status, answer) == (400, {"error": "Invalid request: missing q parameter"})
    status, _, answer = pair_server.request("POST", "/translate", b"q=" + b"a" * (2 << 20), form)
    assert status == 413


@pytest.fixture(scope="module")
def multilingual_server(en_de_fr_run: Path, tmp_path_factory: pytest.TempPathFactory):
    """One en -> de, fr model; requests wait 100 ms for others, so that concurrent ones share a batch."""
    started = Server(
        en_de_fr_run, tmp_path_factory.mktemp("serve-multilingual") / "stderr.log", "--max-delay-ms", "100"
    )
    yield started
    started.stop()


def test_a_multilingual_model_serves_every_target_it_knows(
    multilingual_server: Server, en_de_fr_run: Path, multi30k: Path
) -> None:
    """Each pair of the model is listed and routed; each request is answered in its own target, as `mtkit translate
    --target-lang` answers, also when requests into both languages arrive together (one batch on the worker)."""
    from concurrent.futures import ThreadPoolExecutor

    from mtkit.engines.torch_engine import TorchTranslator
    from tests.conftest import MULTILINGUAL_SENTENCES, multilingual_lines

    lines = multilingual_lines(multi30k, MULTILINGUAL_SENTENCES)["en"][:6]
    expected = {lang: TorchTranslator.load(en_de_fr_run, target_lang=lang).translate(lines) for lang in ("de", "fr")}
    client = LibreTranslateAPI(url(multilingual_server))
    assert client.languages() == [
        {"code": "de", "name": "German", "targets": []},
        {"code": "en", "name": "English", "targets": ["de", "fr"]},
        {"code": "fr", "name": "French", "targets": []},
    ]
    info = multilingual_server.request("GET", "/info")[2]
    assert info["models"][0]["pairs"] == ["en->de", "en->fr"] and info["language_codes"] == ["de", "fr"]
    requests_ = [(lang, line) for line in lines for lang in ("de", "fr")]
    with ThreadPoolExecutor(len(requests_)) as pool:
        answers = list(
            pool.map(
                lambda request: multilingual_server.translate({"text": [request[1]], "target": request[0]}), requests_
            )
        )
    assert [answer[2]["translations"][0] for answer in answers] == [
        expected[lang][lines.index(line)] for lang, line in requests_
    ]
    assert client.translate(lines[0], "en", "fr") == expected["fr"][0]
    status, _, own_codes = multilingual_server.translate({"text": [f">>fr<< {lines[1]}", f">>de<< {lines[1]}"]})
    assert status == 200 and own_codes["translations"] == [expected["fr"][1], expected["de"][1]]


def test_a_multilingual_model_refuses_a_missing_or_unknown_target_in_one_line(multilingual_server: Server) -> None:
    status, _, refused = multilingual_server.translate({"text": ["A dog runs."], "source": "en"})
    assert (status, refused) == (
        400,
        {
            "error": "line 1: target: this model translates into de, fr; choose one, or "
            "begin the line with its code, such as >>de<<"
        },
    )
    status, _, refused = multilingual_server.translate({"text": ["A dog runs."], "target": "cs"})
    assert (status, refused) == (400, {"error": "cs is not supported (languages served: de, en, fr)"})
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    status, _, refused = multilingual_server.request(
        "POST", "/translate", urlencode({"q": "A dog runs.", "source": "en", "target": "cs"}).encode(), form
    )
    assert (status, refused) == (400, {"error": "cs is not supported (languages served: de, en, fr)"})
