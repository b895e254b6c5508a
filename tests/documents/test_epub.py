"""EPUB books made by EbookLib, translated by stand-in translators and read back by EbookLib: the chapters' bodies
translated with their markup, the head, declaration and DOCTYPE as written, the nav and NCX labels and the title
translated, every other member byte-identical, mimetype first and stored, the XHTML well-formed."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from lxml import etree

from mtkit.documents.epub import epub_job
from mtkit.documents.job import DocumentError
from mtkit.documents.safety import Limits
from tests.documents.test_office import Recorder, finish, members, members_with, png, upper

epub = pytest.importorskip("ebooklib.epub")

CHAPTER = (
    "<h1>Chapter one</h1><p>The quick fox is <b>very</b> fast today. Read <a href='https://example.com/'>the "
    "manual page</a> before you start.</p><ul><li>First item of the list</li></ul>"
    "<table><tr><td>Left cell</td><td>Right cell</td></tr></table><p><img src='images/dot.png' alt='dot'/></p>"
)


def make_epub(tmp_path: Path) -> bytes:
    book = epub.EpubBook()
    book.set_identifier("id-1")
    book.set_title("The book title")
    book.set_language("en")
    chapter = epub.EpubHtml(title="Chapter one", file_name="chapter1.xhtml", lang="en")
    chapter.content = CHAPTER
    book.add_item(chapter)
    book.add_item(epub.EpubItem(uid="dot", file_name="images/dot.png", media_type="image/png", content=png()))
    book.toc = [epub.Link("chapter1.xhtml", "Chapter one", "chapter1")]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", chapter]
    path = tmp_path / "book.epub"
    epub.write_epub(str(path), book)
    return path.read_bytes()


def test_epub_translated_and_kept(tmp_path: Path) -> None:
    source = make_epub(tmp_path)
    out = finish(epub_job(source, "book.epub", "en", Limits()), upper)
    before, after = members(source), members(out)
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"EPUB/chapter1.xhtml", "EPUB/nav.xhtml", "EPUB/toc.ncx", "EPUB/content.opf"}
    assert list(after) == list(before)
    chapter_before, chapter_after = before["EPUB/chapter1.xhtml"], after["EPUB/chapter1.xhtml"]
    head = chapter_before[: chapter_before.index(b"<body")]
    assert chapter_after.startswith(head)  # declaration, DOCTYPE and head as written
    root = etree.fromstring(chapter_after)  # well-formed
    body = root.find("{http://www.w3.org/1999/xhtml}body")
    assert "".join(body.itertext()) == "".join(etree.fromstring(chapter_before).find(body.tag).itertext()).upper()
    bold = body.find(".//{http://www.w3.org/1999/xhtml}b")
    assert bold.text == "VERY"
    link = body.find(".//{http://www.w3.org/1999/xhtml}a")
    assert (link.text, link.get("href")) == ("THE MANUAL PAGE", "https://example.com/")
    with zipfile.ZipFile(io.BytesIO(out)) as archive:
        assert (archive.infolist()[0].filename, archive.infolist()[0].compress_type) == ("mimetype", 0)
    path = tmp_path / "out.epub"
    path.write_bytes(out)
    book = epub.read_epub(str(path))
    assert book.get_metadata("DC", "title")[0][0] == "THE BOOK TITLE"
    assert b"CHAPTER ONE" in book.get_item_with_href("toc.ncx").get_content()
    assert b">CHAPTER ONE</a>" in book.get_item_with_href("nav.xhtml").get_content()
    assert book.get_item_with_href("images/dot.png").get_content() == png()


def test_epub_sentences_are_asked_whole(tmp_path: Path) -> None:
    recorder = Recorder()
    finish(epub_job(make_epub(tmp_path), "book.epub", "en", Limits()), recorder)
    assert {"The quick fox is very fast today.", "Read the manual page before you start."} <= set(recorder.asked)
    assert {"The book title", "Chapter one", "Left cell"} <= set(recorder.asked)


def test_epub_refuses_a_chapter_with_entities(tmp_path: Path) -> None:
    hostile = (
        b'<?xml version="1.0"?><!DOCTYPE html [<!ENTITY e SYSTEM "file:///etc/passwd">]><html><body>&e;</body></html>'
    )
    data = members_with(make_epub(tmp_path), "EPUB/chapter1.xhtml", hostile)
    with pytest.raises(DocumentError, match=r"^book\.epub: EPUB/chapter1\.xhtml: the XML declares entities"):
        epub_job(data, "book.epub", "en", Limits())


def test_epub_without_container(tmp_path: Path) -> None:
    data = members_with(make_epub(tmp_path), "META-INF/container.xml", b"<x/>")
    with pytest.raises(DocumentError, match=r"^book\.epub: META-INF/container\.xml names no package file"):
        epub_job(data, "book.epub", "en", Limits())
