"""TMX 1.4b read as a stream and written as one: lxml's iterparse with entities unresolved, no DTD, no network and
no huge trees (mtkit.corpus.translation_files.xml_events, the corpus's reader's too), each translation unit cleared
once read, so a file of any size is read in bounded memory; a DOCTYPE declaring entities (XXE, a billion laughs),
XML that is not well-formed or a file without the languages asked is a one-line UserError naming the file. Writing
streams too (lxml's xmlfile). Pairs only: no store, no index. Also what every reader of a memory file holds
(PairFile), TMX's and mtkit.memory.readers' alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from lxml import etree

from mtkit.corpus.translation_files import text_of, xml_events
from mtkit.errors import UserError

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


def base_language(code: str) -> str:
    """en-US, EN_gb, en -> en: a memory's languages as the server's models name them."""
    return code.strip().replace("_", "-").split("-")[0].lower()


def cleared(element: Any) -> None:
    """An element read, freed with the siblings before it: what keeps iterparse's tree small."""
    element.clear()
    parent = element.getparent()
    while parent is not None and element.getprevious() is not None:
        del parent[0]


@dataclass
class PairFile:
    """What every reader of a memory file holds (mtkit.memory.readers.PairReader): the stream and its name for
    errors, the languages given ("": the file's own, found as it is read) and the units skipped so far."""

    stream: IO[bytes]
    name: str
    source_lang: str = ""
    target_lang: str = ""
    skipped: int = 0


@dataclass
class TmxReader(PairFile):
    """The (source, target) pairs of a TMX file, read as they are iterated. `source_lang` empty: the header's
    srclang; `target_lang` empty: the first unit's other language. `skipped`: units without both languages."""

    languages: set[str] = field(default_factory=set)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        root_seen = False
        for event, element in xml_events(self.stream, self.name, ("tu", "header")):
            if event == "start":
                if etree.QName(element).localname != "tmx":
                    raise UserError(f"{self.name}: not TMX (the root element is <{etree.QName(element).localname}>)")
                root_seen = True
                continue
            if etree.QName(element).localname == "header":
                srclang = element.get("srclang", "")
                if not self.source_lang and srclang and srclang != "*all*":
                    self.source_lang = base_language(srclang)
                continue
            pair = self._pair(element)
            cleared(element)
            if pair is None:
                self.skipped += 1
            elif pair[0].strip() and pair[1].strip():
                yield pair
            else:
                self.skipped += 1
        if not root_seen:
            raise UserError(f"{self.name}: empty, not TMX")

    def _pair(self, unit: Any) -> tuple[str, str] | None:
        variants: dict[str, str] = {}
        for tuv in unit:
            if not isinstance(tuv.tag, str) or etree.QName(tuv).localname != "tuv":
                continue
            language = base_language(tuv.get(XML_LANG) or tuv.get("lang") or "")
            seg = next((c for c in tuv if isinstance(c.tag, str) and etree.QName(c).localname == "seg"), None)
            if language and seg is not None:
                variants.setdefault(language, text_of(seg))
        self.languages.update(variants)
        if not self.source_lang:
            raise UserError(f"{self.name}: the header names no srclang; give --source-lang")
        if not self.target_lang:
            others = sorted(set(variants) - {self.source_lang})
            if len(others) > 1:
                raise UserError(f"{self.name}: units in {', '.join(others)}; give --target-lang")
            if not others:
                return None
            self.target_lang = others[0]
        if self.source_lang not in variants or self.target_lang not in variants:
            return None
        return variants[self.source_lang], variants[self.target_lang]


# What XML 1.0 cannot hold (C0 controls but tab and line breaks, lone surrogates, U+FFFE and U+FFFF): a catalog's
# terminal escapes ("\x1b[1m") and stray bytes, which lxml refuses with a ValueError and a TMX reader would too.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def write_tmx(pairs: Iterator[tuple[str, str]], stream: IO[bytes], source_lang: str, target_lang: str) -> int:
    """The pairs as TMX 1.4b, written as they come, without the characters XML cannot hold (left out, as
    translate-toolkit's and Pontoon's TMX writers leave them out); the number written."""
    count = 0
    with etree.xmlfile(stream, encoding="utf-8") as xml:
        xml.write_declaration()
        with xml.element("tmx", version="1.4"):
            header = {"creationtool": "mtkit", "creationtoolversion": "1", "datatype": "plaintext"}
            header |= {"segtype": "sentence", "adminlang": "en", "srclang": source_lang, "o-tmf": "mtkit"}
            xml.write(etree.Element("header", header))
            with xml.element("body"):
                for source, target in pairs:
                    unit = etree.Element("tu")
                    for language, text in ((source_lang, source), (target_lang, target)):
                        tuv = etree.SubElement(unit, "tuv", {XML_LANG: language})
                        etree.SubElement(tuv, "seg").text = _NOT_XML.sub("", text)
                    xml.write(unit)
                    count += 1
    return count
