"""Which format a document is, from its name and its content together, and its Job: an extension that disagrees
with the content, an unknown one, a binary file named as text or a file over the size limit is refused with a
DocumentError naming the file. The text formats' modules are imported when used, each format's only where needed."""

from __future__ import annotations

import re
from pathlib import PurePath

from mtkit.documents.job import DocumentError, Job
from mtkit.documents.safety import OLE2, Limits, open_zip, over_limit, read_member

FORMATS = (
    *("txt", "html", "htm", "md", "markdown", "docx", "odt", "odp", "pptx", "epub", "srt", "vtt"),
    *("po", "pot", "xlf", "xliff", "xlsx"),
)
SAME = {"htm": "html", "markdown": "md", "pot": "po", "xliff": "xlf"}  # the other extensions, as detect_format names
ZIPPED = ("docx", "odt", "odp", "pptx", "epub", "xlsx")
DESCRIBED = {
    "docx": "a Word document (.docx)",
    "pptx": "a PowerPoint presentation (.pptx)",
    "xlsx": "an Excel workbook (.xlsx)",
    "odt": "an OpenDocument text (.odt)",
    "odp": "an OpenDocument presentation (.odp)",
    "epub": "an EPUB book (.epub)",
}
MIMETYPES = {
    "application/vnd.oasis.opendocument.text": "odt",
    "application/vnd.oasis.opendocument.presentation": "odp",
    "application/epub+zip": "epub",
}
ZIP_SIGNATURES = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
_XLIFF_ROOT = re.compile(
    rb"^(?:<\?xml[^>]*\?>|<!--.*?-->|<!DOCTYPE[^\[>]*(?:\[.*?\])?\s*>|\s)*<(?:\w+:)?xliff[\s>]", re.S
)


def detect_format(name: str, data: bytes, limits: Limits = Limits()) -> str:
    """The format (txt, html, md, docx, odt, odp, pptx, epub, srt, vtt, po, xlf or xlsx: .htm reads as html,
    .markdown as md, .pot as po, .xliff as xlf), when the extension and the content agree."""
    extension = PurePath(name).suffix.lower().lstrip(".")
    if extension not in FORMATS:
        shown = f"the extension .{extension}" if extension else "no extension"
        raise DocumentError(f"{name}: {shown} is not a format mtkit translates; it knows .{', .'.join(FORMATS)}")
    wanted = SAME.get(extension, extension)
    if wanted in ZIPPED:
        found = _zip_format(name, data, limits)
        if found != wanted:
            raise DocumentError(f"{name}: the content is {DESCRIBED[found]}, not .{extension}")
        return wanted
    if data.startswith(ZIP_SIGNATURES):
        try:
            found = _zip_format(name, data, limits)
        except DocumentError:
            found = ""
        if found:
            raise DocumentError(f"{name}: the content is {DESCRIBED[found]}, not .{extension}")
        raise DocumentError(f"{name}: not text but a zip archive, so not .{extension}")
    if data.startswith(OLE2):
        raise DocumentError(f"{name}: not text but an OLE2 file (a legacy .doc/.ppt/.xls?), so not .{extension}")
    if b"\x00" in data:
        raise DocumentError(f"{name}: not text: it holds NUL bytes (a binary file, or UTF-16: save it as UTF-8)")
    _check_localization(name, data, wanted, extension)
    return wanted


def _check_localization(name: str, data: bytes, wanted: str, extension: str) -> None:
    """A catalog that is XML, or an XLIFF file whose root is not <xliff>, is mislabelled (a cheap look at its
    start: the format's own reader checks the rest)."""
    start = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if wanted == "po" and start.startswith(b"<"):
        kind = "XLIFF" if b"<xliff" in start else "XML"
        raise DocumentError(f"{name}: the content is {kind}, not a gettext catalog (.{extension})")
    if wanted == "xlf" and not _XLIFF_ROOT.search(start):
        raise DocumentError(f"{name}: the content is not XLIFF (no <xliff> root element), so not .{extension}")


def _zip_format(name: str, data: bytes, limits: Limits) -> str:
    """The document format a zip holds, from [Content_Types].xml's parts (OOXML) or its `mimetype` member (ODF,
    EPUB); a DocumentError for a zip that holds none mtkit knows."""
    archive = open_zip(data, name, limits)
    members = set(archive.namelist())
    if "[Content_Types].xml" in members:
        if "word/document.xml" in members:
            return "docx"
        if "ppt/presentation.xml" in members:
            return "pptx"
        if "xl/workbook.xml" in members:
            return "xlsx"
        raise DocumentError(f"{name}: the content is an Office Open XML package, which mtkit does not translate")
    if "mimetype" in members:
        if archive.getinfo("mimetype").file_size > 200:
            raise DocumentError(f"{name}: the zip's mimetype member is too long to be one")
        mimetype = read_member(archive, "mimetype", name).decode("ascii", "replace").strip()
        if mimetype in MIMETYPES:
            return MIMETYPES[mimetype]
        raise DocumentError(f"{name}: the content is {mimetype!r}, which mtkit does not translate")
    raise DocumentError(f"{name}: a zip archive that is no document mtkit knows (no [Content_Types].xml or mimetype)")


def open_job(
    name: str, data: bytes, language: str, limits: Limits = Limits(), target: str = "", fuzzy: bool = True
) -> Job:
    """The document's Job, once its size and format pass; `language` is the source language (for sentences),
    `target` the language it is translated into (a catalog's plural forms and header, an XLIFF file's target
    language where it names none; "" leaves them to the file). `fuzzy`: a catalog's machine-filled entries are
    flagged fuzzy."""
    if len(data) > limits.max_bytes:
        raise DocumentError(f"{name}: {over_limit(len(data), limits.max_bytes)} (--max-file-bytes)")
    kind = detect_format(name, data, limits)
    if kind == "txt":
        from mtkit.documents.plain import txt_job

        return txt_job(data, name, language)
    if kind == "html":
        from mtkit.documents.plain import html_job

        return html_job(data, name, language)
    if kind == "md":
        from mtkit.documents.markdown import markdown_job

        return markdown_job(data, name, language)
    if kind == "srt":
        from mtkit.documents.subtitles import srt_job

        return srt_job(data, name, language)
    if kind == "vtt":
        from mtkit.documents.subtitles import vtt_job

        return vtt_job(data, name, language)
    if kind == "po":
        from mtkit.documents.gettext import po_job

        return po_job(data, name, language, target, fuzzy)
    if kind == "xlf":
        from mtkit.documents.xliff import xliff_job

        return xliff_job(data, name, language, target)
    if kind == "xlsx":
        from mtkit.documents.spreadsheet import xlsx_job

        return xlsx_job(data, name, language, limits)
    if kind == "epub":
        from mtkit.documents.epub import epub_job

        return epub_job(data, name, language, limits)
    from mtkit.documents import office

    jobs = {"docx": office.docx_job, "pptx": office.pptx_job, "odt": office.odt_job, "odp": office.odp_job}
    return jobs[kind](data, name, language, limits)
