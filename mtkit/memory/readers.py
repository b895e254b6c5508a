"""The files a memory is imported from, each as its (source, target) pairs and its languages: TMX 1.4b
(mtkit.memory.tmx), a gettext PO catalog's translated entries (mtkit.documents.po_file's reader; fuzzy ones left
out) and a compiled MO catalog's (its binary tables read here), XLIFF 1.2 and 2.x units with targets (streamed like
TMX) and TSV (source TAB target a line). Chosen by the file's name; a file that is none of them, or is broken, is a
one-line UserError naming it. No store, no index.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from lxml import etree

from mtkit.corpus.translation_files import header_field, mo_entries, text_of, xml_events
from mtkit.errors import UserError, check
from mtkit.memory.tmx import PairFile, TmxReader, base_language, cleared

FORMATS = {".tmx": "tmx", ".po": "po", ".mo": "mo", ".xlf": "xliff", ".xliff": "xliff", ".tsv": "tsv", ".txt": "tsv"}


class PairReader(Protocol):
    """What every reader gives: its pairs as iterated, and, once iterated, its languages and skipped units."""

    source_lang: str
    target_lang: str
    skipped: int

    def __iter__(self) -> Iterator[tuple[str, str]]: ...


def file_format(name: str) -> str:
    """tmx, po, mo, xliff or tsv, by the file's name (a .gz is not taken: a memory file is read as a stream as it
    is)."""
    found = FORMATS.get(Path(name).suffix.lower())
    check(found is not None, f"{name}: a memory is imported from .tmx, .po, .mo, .xlf/.xliff or .tsv, not this file")
    return found  # type: ignore[return-value]


def pair_reader(stream: IO[bytes], name: str, source_lang: str = "", target_lang: str = "") -> PairReader:
    """The reader of `stream` by `name`'s format, with the languages given ("": the file's own)."""
    kind = file_format(name)
    source, target = base_language(source_lang), base_language(target_lang)
    if kind == "tmx":
        return TmxReader(stream, name, source, target)
    if kind == "xliff":
        return XliffReader(stream, name, source, target)
    if kind == "po":
        return PoReader(stream, name, source or "en", target)
    if kind == "mo":
        return MoReader(stream, name, source or "en", target)
    return TsvReader(stream, name, source, target)


@dataclass
class TsvReader(PairFile):
    """source TAB target a line, UTF-8; an empty line is skipped; the languages must be given."""

    def __iter__(self) -> Iterator[tuple[str, str]]:
        check(
            bool(self.source_lang and self.target_lang),
            f"{self.name}: a TSV file names no languages; give --source-lang and --target-lang",
        )
        for number, raw in enumerate(self.stream, start=1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise UserError(f"{self.name}:{number}: not UTF-8 text") from None
            if not line.strip():
                continue
            fields = line.split("\t")
            check(len(fields) == 2, f"{self.name}:{number}: expected source<TAB>target, got {len(fields)} fields")
            if fields[0].strip() and fields[1].strip():
                yield fields[0], fields[1]
            else:
                self.skipped += 1


@dataclass
class PoReader(PairFile):
    """A catalog's translated, not fuzzy entries: msgid -> msgstr (a plural's first form); the target language is
    the header's Language unless given."""

    source_lang: str = "en"  # gettext's msgids are written in English unless the catalog says otherwise

    def __iter__(self) -> Iterator[tuple[str, str]]:
        from mtkit.documents.job import DocumentError
        from mtkit.documents.po_file import read_catalog

        try:
            catalog = read_catalog(self.stream.read(), self.name)
        except DocumentError as exc:
            raise UserError(str(exc)) from None
        for entry in catalog.entries:
            if entry.header:
                language = next(
                    (
                        line.split(":", 1)[1]
                        for line in entry.msgstr.get(0, "").splitlines()
                        if line.startswith("Language:")
                    ),
                    "",
                )
                self.target_lang = self.target_lang or base_language(language)
                continue
            check(bool(self.target_lang), f"{self.name}: the header names no Language; give --target-lang")
            if entry.translated and "fuzzy" not in entry.flags and entry.msgid.strip():
                yield entry.msgid, entry.msgstr.get(0, "")
            else:
                self.skipped += 1


@dataclass
class MoReader(PairFile):
    """A compiled gettext catalog (GNU's MO format: a magic number, then two tables of (length, offset) strings):
    msgid -> msgstr, a plural's msgid_plural -> its second form too; msgctxt left out. msgfmt already left out the
    fuzzy and untranslated entries. The target language is the header's Language unless given."""

    source_lang: str = "en"  # as PoReader's

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for entry in mo_entries(self.stream.read(), self.name):
            if not entry.msgid:
                self.target_lang = self.target_lang or base_language(header_field(entry.msgstr[0], "Language"))
                continue
            check(bool(self.target_lang), f"{self.name}: the header names no Language; give --target-lang")
            forms = entry.msgstr
            for source, target in ((entry.msgid, forms[0]), (entry.msgid_plural, forms[1] if len(forms) > 1 else "")):
                if source.strip() and target.strip():
                    yield source, target
                elif source:
                    self.skipped += 1


@dataclass
class XliffReader(PairFile):
    """XLIFF 1.2 trans-units and 2.x segments with a non-empty target, streamed; languages from the file's
    source-language/target-language (1.2) or srcLang/trgLang (2.x) unless given."""

    seen: set[str] = field(default_factory=set)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for event, element in xml_events(self.stream, self.name, ("trans-unit", "segment", "file")):
            local = etree.QName(element).localname
            if event == "start":
                check(local == "xliff", f"{self.name}: not XLIFF (the root element is <{local}>)")
                self._languages(element.get("srcLang", ""), element.get("trgLang", ""))
                continue
            if local == "file":
                cleared(element)
                continue
            pair = self._pair(element)
            cleared(element)
            if pair is None:
                self.skipped += 1
            else:
                yield pair

    def _languages(self, source: str, target: str) -> None:
        self.source_lang = self.source_lang or base_language(source)
        self.target_lang = self.target_lang or base_language(target)

    def _pair(self, unit: Any) -> tuple[str, str] | None:
        parent = unit.getparent()
        while parent is not None and etree.QName(parent).localname != "file":
            parent = parent.getparent()
        if parent is not None:
            self._languages(parent.get("source-language", ""), parent.get("target-language", ""))
        check(
            bool(self.source_lang and self.target_lang),
            f"{self.name}: the file names no source and target language; give --source-lang and --target-lang",
        )
        parts = {etree.QName(c).localname: c for c in unit if isinstance(c.tag, str)}
        if "source" not in parts or "target" not in parts:
            return None
        source, target = text_of(parts["source"]), text_of(parts["target"])
        return (source, target) if source.strip() and target.strip() else None
