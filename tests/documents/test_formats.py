"""A document's format from its extension and its content together: mislabelled, unknown, binary-as-text and
oversized files refused with the file's name; open_job dispatches to each format's job."""

from __future__ import annotations

import pytest

from mtkit.documents.formats import FORMATS, detect_format, open_job
from mtkit.documents.job import DocumentError, run_jobs
from mtkit.documents.safety import OLE2, Limits
from tests.documents.test_office import make_docx, make_odt, make_pptx, upper
from tests.documents.test_safety import zipped

ODP = zipped({"mimetype": b"application/vnd.oasis.opendocument.presentation", "content.xml": b"<x/>"})
EPUB = zipped({"mimetype": b"application/epub+zip", "META-INF/container.xml": b"<x/>"})
XLSX = zipped({"[Content_Types].xml": b"<Types/>", "xl/workbook.xml": b"<w/>"})


def test_each_zip_format_is_found_from_its_content() -> None:
    assert detect_format("a.docx", make_docx()) == "docx"
    assert detect_format("a.PPTX", make_pptx()) == "pptx"
    assert detect_format("a.odt", make_odt()) == "odt"
    assert detect_format("a.odp", ODP) == "odp"
    assert detect_format("a.epub", EPUB) == "epub"


def test_text_formats_and_their_other_extensions() -> None:
    for name, kind in [("a.txt", "txt"), ("a.htm", "html"), ("a.html", "html"), ("a.markdown", "md")]:
        assert detect_format(name, b"Hello world.") == kind
    assert detect_format("a.srt", b"1\n00:00:01,000 --> 00:00:02,000\nHi\n") == "srt"
    assert detect_format("a.vtt", b"WEBVTT\n") == "vtt"


def test_a_mislabelled_extension_names_the_content() -> None:
    with pytest.raises(DocumentError, match=r"^x\.docx: the content is an OpenDocument text \(\.odt\), not \.docx$"):
        detect_format("x.docx", make_odt())
    with pytest.raises(DocumentError, match=r"^x\.odp: the content is a Word document \(\.docx\), not \.odp$"):
        detect_format("x.odp", make_docx())
    with pytest.raises(DocumentError, match=r"^x\.txt: the content is a PowerPoint presentation \(\.pptx\), not \.txt"):
        detect_format("x.txt", make_pptx())
    with pytest.raises(DocumentError, match=r"^x\.docx: the content is an Excel workbook"):
        detect_format("x.docx", XLSX)


def test_binary_named_as_text_is_refused() -> None:
    with pytest.raises(DocumentError, match=r"^x\.md: not text: it holds NUL bytes"):
        detect_format("x.md", b"Hello\x00world")
    with pytest.raises(DocumentError, match=r"^x\.txt: not text but an OLE2 file"):
        detect_format("x.txt", OLE2 + b"rest")
    with pytest.raises(DocumentError, match=r"^x\.html: not text but a zip archive"):
        detect_format("x.html", zipped({"a.txt": b"hi"}))
    with pytest.raises(DocumentError, match=r"^x\.docx: encrypted or a legacy \.doc/\.ppt"):
        detect_format("x.docx", OLE2 + bytes(100))


def test_an_unknown_extension_lists_the_formats() -> None:
    with pytest.raises(DocumentError, match=r"^report\.pdf: the extension \.pdf is not a format") as caught:
        detect_format("report.pdf", b"%PDF-1.7")
    assert all(f".{kind}" in str(caught.value) for kind in FORMATS)
    with pytest.raises(DocumentError, match=r"^README: no extension is not a format"):
        detect_format("README", b"text")


def test_open_job_refuses_a_file_over_max_bytes() -> None:
    with pytest.raises(
        DocumentError, match=r"^big\.txt: 2000 bytes, over the limit of 1000 bytes \(--max-file-bytes\)$"
    ):
        open_job("big.txt", b"x" * 2000, "en", Limits(max_bytes=1000))


def test_open_job_dispatches_to_the_office_formats() -> None:
    job = open_job("report.docx", make_docx(), "en")
    assert "The quick fox is very fast today." in job.texts
    assert detect_format("out.docx", run_jobs([job], upper)[0]) == "docx"


def test_open_job_dispatches_to_the_text_formats() -> None:
    pytest.importorskip("mtkit.documents.plain")
    job = open_job("notes.txt", b"Hello world. How are you?\n", "en")
    assert job.texts and all(isinstance(text, str) for text in job.texts)
