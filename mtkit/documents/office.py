"""Word (.docx), PowerPoint (.pptx) and OpenDocument (.odt, .odp) files as XML in a zip, read and written with lxml:
the parts that hold the document's text are parsed, their paragraphs translated run by run (mtkit.documents.format_runs)
and written back; every other member is copied byte for byte. The title in the document's properties is
translated too; no chart, SmartArt, slide layout or master, or alternative text is."""

from __future__ import annotations

import zipfile
from collections.abc import Callable

from lxml import etree

from mtkit.documents.format_runs import (
    TEXT,
    A,
    Paragraph,
    RunsTranslation,
    W,
    docx_paragraph,
    element_paragraph,
    has_words,
    odf_paragraph,
    pptx_paragraph,
)
from mtkit.documents.job import DocumentError, Job
from mtkit.documents.safety import Limits, open_zip, parse_xml, read_member, rezip, write_xml

CONTENT_TYPES = "{http://schemas.openxmlformats.org/package/2006/content-types}"
DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
_WORD = "application/vnd.openxmlformats-officedocument.wordprocessingml."
_SLIDES = "application/vnd.openxmlformats-officedocument.presentationml."
_CORE = "application/vnd.openxmlformats-package.core-properties+xml"
DOCX_PARTS = tuple(
    _WORD + kind + "+xml"
    for kind in (
        "document.main template.main document.macroEnabled.main header footer footnotes endnotes comments".split()
    )
)
PPTX_PARTS = (_SLIDES + "slide+xml", _SLIDES + "notesSlide+xml")
ODF_PARTS = ("content.xml", "styles.xml", "meta.xml")

Paragraphs = Callable[[etree._Element], list[Paragraph]]


def docx_job(data: bytes, name: str, language: str, limits: Limits) -> Job:
    """The body, headers, footers, footnotes, endnotes and comments (w:p), and the title in docProps/core.xml."""

    def paragraphs(root: etree._Element) -> list[Paragraph]:
        return [docx_paragraph(p) for p in root.iter(W + "p")] + _titles(root)

    archive = open_zip(data, name, limits)
    return _job(archive, name, language, _typed_parts(archive, name, DOCX_PARTS), paragraphs)


def pptx_job(data: bytes, name: str, language: str, limits: Limits) -> Job:
    """Every slide and its notes (a:p, tables and text boxes included), and the title in docProps/core.xml."""

    def paragraphs(root: etree._Element) -> list[Paragraph]:
        return [pptx_paragraph(p) for p in root.iter(A + "p")] + _titles(root)

    archive = open_zip(data, name, limits)
    return _job(archive, name, language, _typed_parts(archive, name, PPTX_PARTS), paragraphs)


def odt_job(data: bytes, name: str, language: str, limits: Limits) -> Job:
    """content.xml (text:p and text:h: body, tables, lists, notes, frames), styles.xml (headers and footers of the
    master pages) and the title in meta.xml."""
    return _odf_job(data, name, language, limits)


def odp_job(data: bytes, name: str, language: str, limits: Limits) -> Job:
    """The slides and their notes in content.xml, the masters' text in styles.xml, the title in meta.xml."""
    return _odf_job(data, name, language, limits)


def _odf_job(data: bytes, name: str, language: str, limits: Limits) -> Job:
    def paragraphs(root: etree._Element) -> list[Paragraph]:
        return [odf_paragraph(p) for p in root.iter(TEXT + "p", TEXT + "h")] + _titles(root)

    archive = open_zip(data, name, limits)
    if "content.xml" not in archive.namelist():
        raise DocumentError(f"{name}: no content.xml in the package: not an OpenDocument file, or a damaged one")
    return _job(archive, name, language, [part for part in ODF_PARTS if part in archive.namelist()], paragraphs)


def _titles(root: etree._Element) -> list[Paragraph]:
    """The document's title (dc:title in docProps/core.xml or meta.xml); found only in those parts."""
    return [element_paragraph(title) for title in root.iter(DC_TITLE) if len(title) == 0]


def _typed_parts(archive: zipfile.ZipFile, name: str, types: tuple[str, ...]) -> list[str]:
    """The members [Content_Types].xml declares of `types`, and the core properties, in the zip's order."""
    declared = parse_xml(read_member(archive, "[Content_Types].xml", name), f"{name}: [Content_Types].xml")
    wanted = {
        override.get("PartName", "").lstrip("/").lower()
        for override in declared.iter(CONTENT_TYPES + "Override")
        if override.get("ContentType") in (*types, _CORE)
    }
    parts = [member for member in archive.namelist() if member.lower() in wanted]
    if not any(member.lower() in wanted for member in parts if not member.lower().startswith("docprops/")):
        raise DocumentError(f"{name}: the package declares no document part in [Content_Types].xml: damaged?")
    return parts


def _job(archive: zipfile.ZipFile, name: str, language: str, parts: list[str], paragraphs: Paragraphs) -> Job:
    """The parts' paragraphs as one translation; the parts with words in them written back, the rest copied."""
    found: list[Paragraph] = []
    changed: dict[str, tuple[etree._Element, bytes]] = {}
    for part in parts:
        raw = read_member(archive, part, name)
        root = parse_xml(raw, f"{name}: {part}")
        mine = paragraphs(root)
        if any(map(has_words, mine)):
            changed[part] = (root, raw)
            found += mine
    runs = RunsTranslation(found, language)

    def finish(translations: list[str]) -> bytes:
        runs.apply(translations)
        return rezip(archive, {part: write_xml(root, raw) for part, (root, raw) in changed.items()})

    return Job(runs.texts, finish, runs.counts | {"parts": len(changed)})
