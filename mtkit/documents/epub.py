"""EPUB books: each XHTML content document the package (OPF) lists, its body through mtkit.text.markup with the XML
declaration, DOCTYPE and head kept as written; the table of contents (the EPUB 3 nav, an XHTML document like the
others, and the EPUB 2 NCX labels) and the title in the OPF translated too. Every other member is copied byte for
byte, `mimetype` first and stored."""

from __future__ import annotations

import posixpath
import re
import zipfile
from urllib.parse import unquote

from lxml import etree

from mtkit.documents.format_runs import Paragraph, RunsTranslation, element_paragraph, has_words
from mtkit.documents.job import DocumentError, Job
from mtkit.documents.safety import Limits, open_zip, parse_xml, read_member, rezip, write_xml
from mtkit.text.markup import HtmlTranslation

CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
OPF = "{http://www.idpf.org/2007/opf}"
NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
XHTML_TYPE = "application/xhtml+xml"
NCX_TYPE = "application/x-dtbncx+xml"
_BODY = re.compile(r"<body\b[^>]*?>")  # its end tag is the last "</body>"; a body written empty ("<body/>") has none


class _Page:
    """One XHTML content document: the text before and after its body's content, kept, and the content's translation."""

    def __init__(self, raw: bytes, where: str, language: str) -> None:
        root = parse_xml(raw, where)  # refuses entities and XML that is not well-formed, before anything is sent
        self.where, self.encoding = where, root.getroottree().docinfo.encoding or "UTF-8"
        self.job: HtmlTranslation | None = None
        try:
            text = raw.decode(self.encoding)
        except (UnicodeDecodeError, LookupError) as error:
            raise DocumentError(f"{where}: not readable as {self.encoding} ({error})") from None
        start, end = _BODY.search(text), text.rfind("</body>")
        if start is None or start.group(0).endswith("/>") or end < start.end():
            self.head, self.tail, self.job = text, "", None
            return
        self.head, self.tail = text[: start.end()], text[end:]
        self.job = HtmlTranslation(text[start.end() : end], language, split=True)

    @property
    def texts(self) -> list[str]:
        return self.job.first if self.job else []

    def finish(self, translations: list[str]) -> bytes:
        body = ""
        if self.job:
            self.job.second(translations)
            body = self.job.result([])
        out = (self.head + body + self.tail).encode(self.encoding)
        try:
            etree.fromstring(out, etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False))
        except etree.XMLSyntaxError as error:  # markup.py keeps tags balanced: this is a bug, not the book's fault
            raise RuntimeError(f"{self.where}: not well-formed XML after translation ({error})") from None
        return out


def epub_job(data: bytes, name: str, language: str, limits: Limits) -> Job:
    """Every XHTML document of the OPF manifest (the nav among them), the NCX's labels and the OPF's title."""
    archive = open_zip(data, name, limits)
    package = _package_path(archive, name)
    opf_raw = read_member(archive, package, name)
    opf = parse_xml(opf_raw, f"{name}: {package}")
    pages: dict[str, _Page] = {}
    xml_parts: dict[str, tuple[etree._Element, bytes]] = {}
    paragraphs: list[Paragraph] = [element_paragraph(title) for title in opf.iter(DC_TITLE) if len(title) == 0]
    if any(map(has_words, paragraphs)):
        xml_parts[package] = (opf, opf_raw)
    for member, media_type in _manifest(opf, package, archive):
        raw = read_member(archive, member, name)
        if media_type == XHTML_TYPE:
            pages[member] = _Page(raw, f"{name}: {member}", language)
        else:
            root = parse_xml(raw, f"{name}: {member}")
            labels = [element_paragraph(text) for text in root.iter(NCX + "text") if len(text) == 0]
            if any(map(has_words, labels)):
                xml_parts[member], paragraphs = (root, raw), paragraphs + labels
    runs = RunsTranslation(paragraphs, language)
    texts = runs.texts + [text for page in pages.values() for text in page.texts]

    def finish(translations: list[str]) -> bytes:
        if len(translations) != len(texts):
            raise ValueError(f"{len(texts)} translations expected, got {len(translations)}")
        at = len(runs.texts)
        runs.apply(translations[:at])
        replaced = {part: write_xml(root, raw) for part, (root, raw) in xml_parts.items()}
        for member, page in pages.items():
            replaced[member] = page.finish(translations[at : at + len(page.texts)])
            at += len(page.texts)
        return rezip(archive, replaced)

    return Job(texts, finish, {"documents": len(pages), "labels": runs.counts["paragraphs"]})


def _package_path(archive: zipfile.ZipFile, name: str) -> str:
    """The OPF's path, from META-INF/container.xml."""
    if "META-INF/container.xml" not in archive.namelist():
        raise DocumentError(f"{name}: no META-INF/container.xml: not an EPUB, or a damaged one")
    container = parse_xml(read_member(archive, "META-INF/container.xml", name), f"{name}: META-INF/container.xml")
    rootfile = container.find(f".//{CONTAINER}rootfile")
    path = rootfile.get("full-path", "") if rootfile is not None else ""
    if path not in archive.namelist():
        raise DocumentError(f"{name}: META-INF/container.xml names no package file that is in the zip ({path!r})")
    return path


def _manifest(opf: etree._Element, package: str, archive: zipfile.ZipFile) -> list[tuple[str, str]]:
    """The manifest's XHTML documents and NCX as (member, media type), in the manifest's order; an entry whose
    file is missing is skipped, as a reader would."""
    members = set(archive.namelist())
    found = []
    for item in opf.iter(OPF + "item"):
        media_type = item.get("media-type", "")
        member = posixpath.normpath(posixpath.join(posixpath.dirname(package), unquote(item.get("href", ""))))
        if media_type in (XHTML_TYPE, NCX_TYPE) and member in members and member not in dict(found):
            found.append((member, media_type))
    return found
