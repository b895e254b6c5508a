"""Protected text and glossaries through a real `mtkit serve` (the old run of tests/data, which cannot copy): mtkit's
POST /translate and LibreTranslate's /translate keep placeholders, URLs, e-mail addresses and inline code byte for
byte and exactly once, take a "glossary" by the "term_method" asked (the model's default without one) and report its
terms and the way they took per sentence, and refuse a bad glossary or method naming the field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.serve.test_app import Server
from tests.text.test_protected_translation import spanned_sentences

OLD_RUN = Path(__file__).resolve().parents[1] / "data" / "run-0681275"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    run = tmp_path_factory.mktemp("protect-serve") / "run"
    shutil.copytree(OLD_RUN, run, ignore=shutil.ignore_patterns("expected"))
    started = Server(run, run.parent / "stderr.log")
    yield started
    started.stop()


def post(server: Server, path: str, payload: dict):
    import json

    return server.request("POST", path, json.dumps(payload).encode(), {"Content-Type": "application/json"})


def test_both_apis_keep_every_span_exactly_once(server: Server, multi30k: Path) -> None:
    cases = spanned_sentences(multi30k, 20)
    texts = [text for text, _ in cases] + ["12", "42 %"]
    status, _, answer = server.translate({"text": texts})
    assert status == 200, answer
    assert [t.count(span) for t, (_, span) in zip(answer["translations"], cases)] == [1] * 20
    assert answer["translations"][-2:] == ["12", "42 %"]
    assert answer["guard"]["protected"] == 22
    status, _, answer = server.translate({"text": texts, "split_sentences": False, "glossary": {"man": "Mensch"}})
    assert status == 200, answer  # one segment a line, as `mtkit translate` without --split-sentences
    assert [t.count(span) for t, (_, span) in zip(answer["translations"], cases)] == [1] * 20
    assert answer["translations"][-2:] == ["12", "42 %"]
    status, _, answer = server.translate({"text": texts[:3], "nbest": 2, "beam": 2})
    assert status == 200 and all(
        row[0]["text"].count(span) == 1 for row, (_, span) in zip(answer["translations"], cases)
    )
    status, _, answer = post(server, "/translate", {"q": texts, "source": "en", "target": "de"})
    assert status == 200, answer
    assert [t.count(span) for t, (_, span) in zip(answer["translatedText"], cases)] == [1] * 20


def test_a_glossary_is_applied_and_reported_per_sentence(server: Server) -> None:
    text = ["A man in a red shirt runs. Ticket ACME-12 is done."]
    status, _, answer = server.translate({"text": text, "glossary": {"red shirt": "Rothemd"}, "protect": [r"ACME-\d+"]})
    assert status == 200, answer
    assert answer["translations"][0].count("Rothemd") == 1 and answer["translations"][0].count("ACME-12") == 1
    first, second = answer["sentences"][0]
    assert first["terms"] == [{"source": "red shirt", "target": "Rothemd", "applied": True}]
    assert first["method"] == "replace" and "terms" not in second and second["protected"] == 1
    status, _, answer = post(
        server, "/translate", {"q": text[0], "source": "en", "target": "de", "glossary": {"red shirt": "Rothemd"}}
    )
    assert status == 200 and answer["translatedText"].count("Rothemd") == 1
    assert answer["sentences"][0]["terms"][0]["applied"] is True


def test_a_bad_glossary_is_refused_naming_the_field(server: Server) -> None:
    status, _, answer = server.translate({"text": ["A dog."], "glossary": ["dog", "Hund"]})
    assert status == 422 and "glossary must be an object of terms" in answer["error"]
    status, _, answer = server.translate({"text": ["A dog."], "glossary": {"dog": 1}})
    assert status == 422 and "glossary['dog'] must be a string" in answer["error"]
    status, _, answer = post(server, "/translate", {"q": "A dog.", "source": "en", "target": "de", "glossary": 3})
    assert status == 400 and "glossary must be an object of terms" in answer["error"]
    assert server.translate({"text": ["A dog."]})[0] == 200  # still serving


def test_the_term_method_asked_is_the_one_used_and_a_bad_one_is_refused_naming_the_field(server: Server) -> None:
    text = ["A man in a red shirt runs."]
    glossary = {"red shirt": "Rothemd"}
    status, _, answer = server.translate({"text": text, "glossary": glossary, "term_method": "placeholder"})
    assert status == 200 and answer["sentences"][0][0]["method"] == "placeholder"  # the stand-in at once
    libre = {"q": text[0], "source": "en", "target": "de", "glossary": glossary, "term_method": "inline"}
    status, _, answer = post(server, "/translate", libre)
    assert status == 200 and answer["sentences"][0]["method"] in ("inline", "placeholder")
    assert answer["translatedText"].count("Rothemd") == 1
    status, _, answer = server.translate({"text": text, "glossary": glossary, "term_method": "hint"})
    assert status == 422 and answer["error"].startswith("term_method must be one of placeholder, inline,")
    status, _, answer = post(server, "/translate", libre | {"term_method": "best"})
    assert status == 400 and answer["error"].startswith("Invalid request: term_method must be one of")


def test_the_server_gives_glossary_targets_to_its_search(server: Server, multi30k: Path) -> None:
    """A target the model would not write (every line's "a" as "Straße") reaches the worker's search: most lines say
    the search placed it ("guided"); a worker that dropped the targets would leave them all to stand-ins."""
    from tests.conftest import read_gz_lines

    lines = [line for line in read_gz_lines(multi30k / "test_2016_flickr.en.gz", 40) if " a " in line][:12]
    glossary = {"a": "Straße"}
    asked = {"text": lines, "glossary": glossary, "split_sentences": False, "term_method": "guided"}
    status, _, answer = server.translate(asked)
    assert status == 200, answer
    assert all(text.count("Straße") >= 1 for text in answer["translations"])
    methods = [text[0]["method"] for text in answer["sentences"]]  # one segment a line
    assert methods.count("guided") >= 0.75 * len(lines), methods
    status, _, answer = server.translate({"text": lines, "glossary": glossary, "term_method": "check-first"})
    assert status == 200 and not any(s["method"] == "guided" for text in answer["sentences"] for s in text)


def test_one_sentence_with_a_glossary_comes_back_alike_on_every_path(server: Server, tmp_path: Path) -> None:
    """The guided search's sentence through `mtkit translate` (whole and split), mtkit's and LibreTranslate's APIs and
    `translate-file`: the same text on each, never empty."""
    from tests.conftest import run_mtkit_in_process

    sentence = "A dog runs down the street."
    entries = {"dog": "Hund", "street": "Straße"}
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("".join(f"{s}\t{t}\n" for s, t in entries.items()), encoding="utf-8")
    run = server.log.parent / "run"  # the fixture's copy of the model the server serves
    outputs = {}
    for name, options in (("translate", ["--no-guard"]), ("translate, split", ["--split-sentences"])):
        done = run_mtkit_in_process("translate", run, "--glossary", glossary, *options, stdin=sentence + "\n")
        assert done.returncode == 0, done.stderr
        outputs[name] = done.stdout.strip()
    status, _, answer = server.translate({"text": [sentence], "glossary": entries})
    assert status == 200, answer
    outputs["POST /translate"] = answer["translations"][0]
    status, _, answer = post(server, "/translate", {"q": sentence, "source": "en", "target": "de", "glossary": entries})
    assert status == 200, answer
    outputs["LibreTranslate /translate"] = answer["translatedText"]
    (tmp_path / "one.txt").write_text(sentence + "\n", encoding="utf-8")
    done = run_mtkit_in_process("translate-file", run, tmp_path / "one.txt", "--glossary", glossary)
    assert done.returncode == 0, done.stderr
    outputs["translate-file"] = (tmp_path / "one.de.txt").read_text(encoding="utf-8").strip()
    assert len(set(outputs.values())) == 1 and all(outputs.values()), outputs
    assert all(target in outputs["translate"] for target in entries.values()), outputs


def test_the_replace_way_aligns_on_the_workers_thread_as_mtkit_translate_does(server: Server, tmp_path: Path) -> None:
    """ "replace" through the server: the output aligned by the model on its worker, the target in place of the
    model's own word ("Hund"), as `mtkit translate --split-sentences` writes it; reported as "replace"."""
    from tests.conftest import run_mtkit_in_process

    lines = ["A dog runs through the grass.", "A dog sleeps."]
    status, _, answer = server.translate({"text": lines, "glossary": {"dog": "Köter"}, "term_method": "replace"})
    assert status == 200, answer
    assert [s["method"] for text in answer["sentences"] for s in text] == ["replace", "replace"]
    assert all(text.count("Köter") == 1 and "Hund" not in text for text in answer["translations"]), answer
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("dog\tKöter\n", encoding="utf-8")
    run = server.log.parent / "run"
    args = ("--glossary", glossary, "--term-method", "replace", "--split-sentences")
    done = run_mtkit_in_process("translate", run, *args, stdin="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == answer["translations"]
