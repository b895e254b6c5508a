"""mtkit.documents.plain: text and HTML files translated by stand-in translators; everything but the sentences comes
back byte for byte."""

from __future__ import annotations

import re

import pytest

from mtkit.documents.job import DocumentError, run_jobs
from mtkit.documents.plain import decode_text, html_job, txt_job
from tests.documents.stand_ins import Recorder

TEXT = (
    "The shop opens at nine. We close at six.\r\n"
    "\r\n"
    "  Indented line, two spaces.   Then three spaces before this one.\r\n"
    "***\r\n"
    "Last line without an end"
)


def test_txt_white_space_and_line_breaks_are_kept() -> None:
    recorder = Recorder()
    out = run_jobs([txt_job(TEXT.encode(), "shop.txt", "en")], recorder)[0].decode()
    assert recorder.asked == [
        "The shop opens at nine.",
        "We close at six.",
        "Indented line, two spaces.",
        "Then three spaces before this one.",
        "Last line without an end",
    ]  # "***" has no words: kept, not sent
    assert out == TEXT.upper()  # only the letters changed: every space and line break is where it was


def test_txt_bom_is_kept_and_a_translation_stays_on_its_line() -> None:
    job = txt_job(b"\xef\xbb\xbfOne.\nTwo.\n", "a.txt", "en")
    assert job.texts == ["One.", "Two."]
    assert job.finish(["Eins\nund so.", "Zwei."]) == "\ufeffEins und so.\nZwei.\n".encode()


def test_empty_and_blank_text() -> None:
    for data in (b"", b"\n \n"):
        job = txt_job(data, "a.txt", "en")
        assert job.texts == [] and job.finish([]) == data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"abc\xffdef", r"report.txt: not UTF-8 text \(byte 0xff at offset 3\)"),
        ("Café".encode("latin-1"), r"report.txt: not UTF-8 text \(byte 0xe9 at offset 3\)"),
        ("Hi".encode("utf-16"), "report.txt: not UTF-8 text .*UTF-16"),
    ],
)
def test_text_that_is_not_utf8_is_refused_with_the_file_name(data: bytes, message: str) -> None:
    for job in (txt_job, html_job):
        with pytest.raises(DocumentError, match=message):
            job(data, "report.txt", "en")
    with pytest.raises(DocumentError):
        decode_text(data, "report.txt")


def test_html_markup_is_kept_and_sentences_go_whole() -> None:
    document = (
        "<!DOCTYPE html>\n<html><head><title>Our shop</title></head>\n<body>\n  <p>We open at <b>nine</b>. "
        'Read <a href="/faq">the answers</a> today.</p>\n  <pre>keep  this</pre>\n</body></html>\n'
    )
    recorder = Recorder()
    job = html_job(b"\xef\xbb\xbf" + document.encode(), "shop.html", "en")
    out = run_jobs([job], recorder)[0]
    assert out.startswith(b"\xef\xbb\xbf")
    text = out.decode()[1:]
    assert "We open at nine." in recorder.asked and "Read the answers today." in recorder.asked
    assert not any("keep" in asked for asked in recorder.asked)
    assert re.findall(r"<[^>]*>", text) == re.findall(r"<[^>]*>", document)  # every tag, in order, as written
    assert re.sub(r"<[^>]*>", "", text) == re.sub(r"<[^>]*>", "", document).upper().replace("KEEP  THIS", "keep  this")
