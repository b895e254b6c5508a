"""Excel workbooks (.xlsx) as Jobs: the text cells' strings (the shared string table, and inline strings in the
sheets) translated in the XML, rich text run by run (mtkit.documents.format_runs); every other member byte for byte,
so numbers, formulas, dates, booleans, styles, merged cells and the sheets' names and order are as they were."""

from __future__ import annotations

import re
import zipfile

from lxml import etree

from mtkit.documents.format_runs import Paragraph, RunsTranslation, Slot
from mtkit.documents.job import DocumentError, Job
from mtkit.documents.office import CONTENT_TYPES
from mtkit.documents.safety import Limits, open_zip, parse_xml, read_member, rezip, write_xml
from mtkit.documents.ui_strings import ALWAYS, Prepared, prepare

S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_TYPES = "application/vnd.openxmlformats-officedocument.spreadsheetml."
SHARED = _TYPES + "sharedStrings+xml"
SHEETS = (_TYPES + "worksheet+xml",)
_KEPT = re.compile(ALWAYS)  # URLs, e-mail addresses, markup: as written


def xlsx_job(data: bytes, name: str, language: str, limits: Limits) -> Job:
    """The shared strings and the sheets' inline strings: a string of one look is translated as text (its line
    breaks kept), one of several looks (rich text) run by run; phonetic guides (rPh) are left as they were."""
    archive = open_zip(data, name, limits)
    parts = _parts(archive, name)
    plain: list[tuple[etree._Element, Prepared]] = []
    rich: list[Paragraph] = []
    changed: dict[str, tuple[etree._Element, bytes]] = {}
    for part, kind in parts:
        raw = read_member(archive, part, name)
        if kind != SHARED and b"inlineStr" not in raw:
            continue  # a sheet without inline strings is not parsed: most are numbers and shared-string indices
        root = parse_xml(raw, f"{name}: {part}")
        strings = root.iter(S + "si") if kind == SHARED else (c.find(S + "is") for c in root.iter(S + "c"))
        mine = [string for string in strings if string is not None and _words(string)]
        if mine:
            changed[part] = (root, raw)
        for string in mine:
            runs = string.findall(S + "r")
            text = string.find(S + "t")
            if not runs and text is not None:
                plain.append((text, prepare(text.text or "", language, _KEPT)))
            elif runs:
                rich.append(_paragraph(runs))
    runs_translation = RunsTranslation(rich, language)
    own = list(dict.fromkeys(text for _, each in plain for text in each.texts))
    texts = own + [text for text in runs_translation.texts if text not in set(own)]

    def finish(translations: list[str]) -> bytes:
        if len(translations) != len(texts):
            raise ValueError(f"{len(texts)} translations expected, got {len(translations)}")
        found = dict(zip(texts, translations))
        for element, each in plain:
            _set_text(element, each.translation(found, _KEPT))
        runs_translation.apply([found[text] for text in runs_translation.texts])
        return rezip(archive, {part: write_xml(root, raw) for part, (root, raw) in changed.items()})

    counts = {"strings": len(plain) + len(rich), "rich": len(rich), "sentences": len(texts)}
    return Job(texts, finish, counts)


def _parts(archive: zipfile.ZipFile, name: str) -> list[tuple[str, str]]:
    """The shared string table and the worksheets [Content_Types].xml declares, in the zip's order."""
    declared = parse_xml(read_member(archive, "[Content_Types].xml", name), f"{name}: [Content_Types].xml")
    kinds = {
        override.get("PartName", "").lstrip("/").lower(): override.get("ContentType", "")
        for override in declared.iter(CONTENT_TYPES + "Override")
        if override.get("ContentType") in (SHARED, *SHEETS)
    }
    if not any(kind in SHEETS for kind in kinds.values()):
        raise DocumentError(f"{name}: the workbook declares no worksheet in [Content_Types].xml: damaged?")
    return [(member, kinds[member.lower()]) for member in archive.namelist() if member.lower() in kinds]


def _words(string: etree._Element) -> bool:
    """Letters outside the phonetic guides."""
    texts = [t.text or "" for t in string.iter(S + "t") if t.getparent().tag != S + "rPh"]
    return any(char.isalpha() for char in "".join(texts))


def _paragraph(runs: list[etree._Element]) -> Paragraph:
    """A rich string's runs as slots, each of its run properties' look."""
    items: Paragraph = []
    for run in runs:
        text = run.find(S + "t")
        if text is not None:
            look = run.find(S + "rPr")
            key = "" if look is None else etree.tostring(look, encoding="unicode")
            items.append(Slot(text, "text", key, text.text or "", preserve=True))
    return items


def _set_text(element: etree._Element, text: str) -> None:
    """Excel drops leading and trailing spaces unless xml:space says to keep them."""
    element.text = text
    if text != text.strip():
        element.set("{http://www.w3.org/XML/1998/namespace}space", "preserve")
