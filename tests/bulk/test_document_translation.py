"""`mtkit translate-file` with a tiny trained model: a Word document and subtitles translated in one command, each
output opened by its own reader; every sentence is the model's translation of it alone (the documents' sentences
batched together change nothing); a bad document among the inputs stops the command before any output is written."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from mtkit.bulk.document_translation import output_path, sentence_translator
from mtkit.engines.factory import load_translator
from tests.conftest import read_gz_lines, run_mtkit_in_process

docx = pytest.importorskip("docx")


@pytest.fixture(scope="module")
def sentences(multi30k: Path) -> list[str]:
    return [line for line in read_gz_lines(multi30k / "test_2016_flickr.en.gz", 40) if line.endswith(".")][:6]


def word_document(sentences: list[str]) -> bytes:
    document = docx.Document()
    document.add_paragraph(sentences[0])
    mixed = document.add_paragraph(sentences[1].split(" ", 2)[0] + " ")
    mixed.add_run(sentences[1].split(" ", 2)[1]).bold = True  # a bold word inside the sentence
    mixed.add_run(" " + sentences[1].split(" ", 2)[2] + " " + sentences[2])
    document.add_table(rows=1, cols=1).cell(0, 0).text = sentences[3]
    document.sections[0].header.paragraphs[0].text = sentences[4]
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def subtitles(sentences: list[str]) -> str:
    """Two sentences over three cues: the first spans cues 1 and 2."""
    words = sentences[0].split()
    half = len(words) // 2
    cues = [" ".join(words[:half]), " ".join(words[half:]), sentences[5]]
    return "".join(f"{i}\n00:00:0{i},000 --> 00:00:0{i},900\n{text}\n\n" for i, text in enumerate(cues, 1))


def test_documents_translate_as_their_sentences_alone(tiny_run: Path, sentences: list[str], tmp_path: Path) -> None:
    (tmp_path / "report.docx").write_bytes(word_document(sentences))
    (tmp_path / "talk.srt").write_text(subtitles(sentences), encoding="utf-8")
    done = run_mtkit_in_process("translate-file", tiny_run, tmp_path / "report.docx", tmp_path / "talk.srt", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert [d["format"] for d in summary["documents"]] == ["docx", "srt"]
    assert summary["guard"]["sentences"] >= 6
    translate, _ = sentence_translator(load_translator(tiny_run))
    alone = dict(zip(sentences, translate(sentences)))  # each sentence by itself, through the same guard

    translated = docx.Document(tmp_path / "report.de.docx")
    paragraphs = [p.text for p in translated.paragraphs]
    assert paragraphs[0] == alone[sentences[0]]
    assert paragraphs[1].endswith(" " + alone[sentences[2]]) and sentences[1] not in paragraphs[1]
    assert any(run.bold for run in translated.paragraphs[1].runs)  # the bold run is still there
    assert translated.tables[0].cell(0, 0).text == alone[sentences[3]]
    assert translated.sections[0].header.paragraphs[0].text == alone[sentences[4]]

    cues = (tmp_path / "talk.de.srt").read_text(encoding="utf-8").split("\n\n")
    source_cues = subtitles(sentences).split("\n\n")
    assert [c.split("\n")[:2] for c in cues] == [c.split("\n")[:2] for c in source_cues]  # numbers and timings
    spanned = " ".join(" ".join(cue.split("\n")[2:]) for cue in cues[:2])
    assert spanned.split() == alone[sentences[0]].split()  # the sentence across two cues translated whole
    assert " ".join(cues[2].split("\n")[2:]).split() == alone[sentences[5]].split()


def test_a_bad_document_stops_the_command_before_anything_is_written(tiny_run: Path, tmp_path: Path) -> None:
    (tmp_path / "good.txt").write_text("A man is sleeping.\n", encoding="utf-8")
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    done = run_mtkit_in_process("translate-file", tiny_run, tmp_path / "good.txt", tmp_path / "broken.docx")
    assert done.returncode == 2 and "broken.docx" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not output_path(tmp_path / "good.txt", "de").exists()
    two = run_mtkit_in_process("translate-file", tiny_run, tmp_path / "good.txt", tmp_path / "x.txt", "--out", "y")
    assert two.returncode == 2 and "--out" in two.stderr
    itself = run_mtkit_in_process("translate-file", tiny_run, tmp_path / "good.txt", "--out", tmp_path / "good.txt")
    assert itself.returncode == 2 and "is the document itself" in itself.stderr


def test_a_file_over_20_mb_is_translated_or_refused_naming_the_option(tiny_run: Path, tmp_path: Path) -> None:
    """No upload limit on the CLI unless --max-file-bytes sets one (the server's meaning); the refusal gives exact
    bytes (rounded to MB, 20.0 MB would be "over" 20.0 MB). A document's sentence count is the guard's."""
    big = tmp_path / "big.txt"
    big.write_bytes(b"A man is sleeping.\n" + b" " * (21 << 20) + b"\nA dog runs.\n")
    size = big.stat().st_size
    refused = run_mtkit_in_process("translate-file", tiny_run, big, "--max-file-bytes", 20 << 20)
    assert refused.returncode == 2 and not output_path(big, "de").exists()
    assert f"{size} bytes, over the limit of {20 << 20} bytes (--max-file-bytes)" in refused.stderr
    done = run_mtkit_in_process("translate-file", tiny_run, big, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["documents"][0]["sentences"] == summary["guard"]["sentences"] == 2
    lines = output_path(big, "de").read_bytes().split(b"\n")
    assert len(lines) == 4 and lines[1] == b" " * (21 << 20) and lines[0] and lines[2]
