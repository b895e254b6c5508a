"""A paragraph's formatting runs translated by sentence, as mtkit.text.markup translates inline HTML tags: the runs of
a document's paragraphs become one HTML string (a span per run that differs from its paragraph's main look), markup
places the spans in each sentence's translation, and each run's text is written back into its own element, its
properties untouched. Knows the run elements of docx, pptx and ODF; never a model. The choices: RunsTranslation."""

from __future__ import annotations

import html
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

from lxml import etree

from mtkit.text.markup import HtmlTranslation
from mtkit.text.sentences import wordy

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"

# docx: inline containers whose runs are read (a hyperlink, a tracked insertion, a content control, a simple field's
# shown text), and items that neither hold text nor cut a sentence (marks, properties, deleted text, field code);
# of those, the ranges that hold text between a start and an end marker (a comment's, a bookmark's, an editing
# permission's): runs inside one are of another look than runs outside it, never one span with them, so the range's
# words come back inside it (merged, the translation went before the range and the comment pointed at nothing)
_DOCX_CONTAINERS = {W + n for n in "hyperlink ins smartTag sdt sdtContent fldSimple customXml dir bdo moveTo".split()}
_DOCX_SKIP = {
    W + n
    for n in (
        "pPr rPr sdtPr sdtEndPr bookmarkStart bookmarkEnd proofErr commentRangeStart commentRangeEnd permStart "
        "permEnd del moveFrom moveFromRangeStart moveFromRangeEnd moveToRangeStart moveToRangeEnd "
        "lastRenderedPageBreak instrText delText commentReference annotationRef"
    ).split()
}
_DOCX_RANGES = {W + "commentRange": "comment", W + "bookmark": "bookmark", W + "perm": "perm"}
_DOCX_SAME = {W + "lang", W + "noProof"}  # run properties that do not change the look
_PPTX_SAME = ("lang", "altLang", "dirty", "err", "smtClean", "smtId", "noProof")
_ODF_CONTAINERS = {TEXT + "span", TEXT + "a"}
_ODF_SKIP = {
    TEXT + n
    for n in (
        "bookmark bookmark-start bookmark-end reference-mark reference-mark-start reference-mark-end "
        "soft-page-break toc-mark toc-mark-start toc-mark-end alphabetical-index-mark "
        "alphabetical-index-mark-start alphabetical-index-mark-end change change-start change-end"
    ).split()
}
_TOKEN = re.compile(r'<p>|</p>|<br>|<span data-r="(\d+)">|</span>|([^<]+)')
# A look that is a link: docx's w:hyperlink and ODF's text:a in the chain of containers, pptx's a:hlinkClick in a:rPr;
# or a docx range (_DOCX_RANGES): its words must stay inside it.
_LINK = re.compile(r"(?:^|/)(?:hyperlink|a)\d+/|hlinkClick|^(?:\[[^\]]*\])+")
BARE, NONE = "B", "-"  # the paragraph's main look (text outside spans); a run without words, sent outside spans


@dataclass(eq=False)
class Slot:
    """A text node of a paragraph: an element's text or tail, of a look (`key`: alike runs share it)."""

    owner: etree._Element | None  # None: spaces the document writes itself (ODF text:s), read but never written
    where: str  # "text" or "tail"
    key: str
    text: str
    preserve: bool = False  # docx: leading or trailing spaces need xml:space="preserve"

    def write(self, text: str) -> None:
        if self.owner is None:
            return
        setattr(self.owner, self.where, text)
        if self.preserve and text != text.strip():
            self.owner.set(XML_SPACE, "preserve")


Paragraph = list[Slot | None]  # None: a void, which cuts the sentence


@dataclass(eq=False)
class _Group:
    """Adjacent slots of one look, between two voids: one span (or bare text) of the HTML."""

    key: str
    slots: list[Slot]
    label: str = BARE

    @property
    def text(self) -> str:
        return "".join(slot.text for slot in self.slots)

    def target(self) -> bool:
        return self.label != NONE and any(slot.owner is not None for slot in self.slots)

    def write(self, text: str) -> None:
        """The text into its first run that held words (else its first), the others emptied."""
        writable = [slot for slot in self.slots if slot.owner is not None]
        main = next((slot for slot in writable if wordy(slot.text)), writable[0] if writable else None)
        for slot in writable:
            slot.write(text if slot is main else "")


def _props(properties: etree._Element | None, same_tags: set[str] = frozenset(), same_attrs: tuple = ()) -> str:
    """A run's look: its properties as XML, without what does not change it (language, spelling marks)."""
    if properties is None:
        return ""
    copy = etree.fromstring(etree.tostring(properties))
    for child in [child for child in copy if child.tag in same_tags]:
        copy.remove(child)
    for attr in same_attrs:
        copy.attrib.pop(attr, None)
    return etree.tostring(copy, encoding="unicode")


def docx_paragraph(paragraph: etree._Element) -> Paragraph:
    """A w:p's runs: each w:t a slot, a run's other children (tab, break, drawing, field char, note reference)
    voids; a paragraph inside (a text box in a drawing) is a paragraph of its own, never read here."""
    items: Paragraph = []
    _docx_walk(paragraph, "", items, itertools.count(), {})
    return items


def _docx_walk(
    element: etree._Element, chain: str, items: Paragraph, counter: Iterator[int], ranges: dict[str, None]
) -> None:
    """Runs read into `items`; `ranges` holds the ranges open where the walk stands ("[comment 3]"), in order."""
    for child in element:
        if not isinstance(child.tag, str):
            continue
        marker = _range_marker(child)
        if marker is not None:
            name, opens = marker
            if opens:
                ranges[name] = None
            else:
                ranges.pop(name, None)
            continue
        if child.tag in _DOCX_SKIP:
            continue
        if child.tag == W + "r":
            key = "".join(ranges) + chain + _props(child.find(W + "rPr"), _DOCX_SAME)
            for part in child:
                if part.tag == W + "t":
                    items.append(Slot(part, "text", key, part.text or "", preserve=True))
                elif part.tag not in _DOCX_SKIP:
                    items.append(None)
        elif child.tag in _DOCX_CONTAINERS:
            _docx_walk(child, f"{chain}{etree.QName(child).localname}{next(counter)}/", items, counter, ranges)
        else:
            items.append(None)


def _range_marker(element: etree._Element) -> tuple[str, bool] | None:
    """("[comment 3]", True) for a w:commentRangeStart w:id="3", False for its end; None for anything else."""
    tag = element.tag
    for prefix, kind in _DOCX_RANGES.items():
        if tag in (prefix + "Start", prefix + "End"):
            return f"[{kind} {element.get(W + 'id', '')}]", tag.endswith("Start")
    return None


def pptx_paragraph(paragraph: etree._Element) -> Paragraph:
    """An a:p's runs (a:r with a:t; a link is in a:rPr, so part of the look); a:br and a:fld are voids."""
    items: Paragraph = []
    for child in paragraph:
        if child.tag == A + "r":
            text = child.find(A + "t")
            if text is not None:
                items.append(Slot(text, "text", _props(child.find(A + "rPr"), same_attrs=_PPTX_SAME), text.text or ""))
        elif isinstance(child.tag, str) and child.tag not in (A + "pPr", A + "endParaRPr"):
            items.append(None)
    return items


def odf_paragraph(paragraph: etree._Element) -> Paragraph:
    """A text:p or text:h: its text nodes (inside text:span and text:a at any depth) as slots; text:s spaces read
    as one space; text:tab, text:line-break, notes, frames, fields and annotations voids."""
    items: Paragraph = [Slot(paragraph, "text", "", paragraph.text)] if paragraph.text else []
    _odf_walk(paragraph, "", items, itertools.count())
    return items


def _odf_walk(element: etree._Element, key: str, items: Paragraph, counter: Iterator[int]) -> None:
    for child in element:
        if child.tag in _ODF_CONTAINERS:
            inner = f"{key}{etree.QName(child).localname}{next(counter)}/"
            if child.text:
                items.append(Slot(child, "text", inner, child.text))
            _odf_walk(child, inner, items, counter)
        elif child.tag == TEXT + "s":
            items.append(Slot(None, "", key, " "))
        elif isinstance(child.tag, str) and child.tag not in _ODF_SKIP:
            items.append(None)
        if child.tail:
            items.append(Slot(child, "tail", key, child.tail))


def element_paragraph(element: etree._Element) -> Paragraph:
    """An element holding plain text only (a title): one slot."""
    return [Slot(element, "text", "", element.text or "")]


def _chunks(paragraph: Paragraph, numbers: Iterator[int]) -> list[list[_Group]]:
    """The paragraph between its voids, as groups of alike slots, each labelled: the look with the most letters is
    bare text, another with words a numbered span, one without words bare text that is not its own."""
    chunks: list[list[_Group]] = [[]]
    for item in paragraph:
        if item is None:
            chunks.append([])
        elif chunks[-1] and chunks[-1][-1].key == item.key:
            chunks[-1][-1].slots.append(item)
        else:
            chunks[-1].append(_Group(item.key, [item]))
    sizes: dict[str, int] = {}
    for item in paragraph:
        if item is not None:
            sizes[item.key] = sizes.get(item.key, 0) + sum(char.isalnum() for char in item.text)
    # A link is never the bare look, however much of the paragraph it holds: its text must come back inside it,
    # and the words around it outside ("by <link>a silver car</link>." kept its full stop out of the link).
    unlinked = {key: size for key, size in sizes.items() if not _LINK.search(key)} or sizes
    bare = max(unlinked, key=unlinked.__getitem__, default="")
    for group in (group for chunk in chunks for group in chunk):
        group.label = BARE if group.key == bare else str(next(numbers)) if wordy(group.text) else NONE
    return chunks


def _html(chunks: list[list[_Group]]) -> str:
    def one(group: _Group) -> str:
        text = html.escape(group.text, quote=False)
        return text if group.label in (BARE, NONE) else f'<span data-r="{group.label}">{text}</span>'

    return "<p>" + "<br>".join("".join(map(one, chunk)) for chunk in chunks) + "</p>"


def _segments(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(label, text) pairs with adjacent ones of the same label joined (a run without words reads as bare)."""
    out: list[tuple[str, str]] = []
    for label, text in pairs:
        label = BARE if label == NONE else label
        if out and out[-1][0] == label:
            out[-1] = (label, out[-1][1] + text)
        else:
            out.append((label, text))
    return out


def _read(document: str) -> list[list[list[tuple[str, str]]]]:
    """The translated HTML back as paragraphs of chunks of (label, text), text unescaped."""
    paragraphs: list[list[list[tuple[str, str]]]] = []
    label = BARE
    for match in _TOKEN.finditer(document):
        token, number, text = match.group(0), match.group(1), match.group(2)
        if token == "<p>":
            paragraphs.append([[]])
        elif token == "<br>":
            paragraphs[-1].append([])
        elif number is not None:
            label = number
        elif token == "</span>":
            label = BARE
        elif text is not None:
            paragraphs[-1][-1].append((label, html.unescape(text)))
    return paragraphs


def _align(targets: list[str], got: list[tuple[str, str]]) -> list[int | None]:
    """For each translated segment, the target group it goes into: a monotone match of equal labels that keeps
    the most text in its own run (a weighted longest common subsequence); None where the order changed."""
    n, m = len(got), len(targets)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            take = best[i + 1][j + 1] + len(got[i][1]) + 1 if got[i][0] == targets[j] else -1
            best[i][j] = max(best[i + 1][j], best[i][j + 1], take)
    match: list[int | None] = [None] * n
    i = j = 0
    while i < n and j < m:
        if got[i][0] == targets[j] and best[i][j] == best[i + 1][j + 1] + len(got[i][1]) + 1:
            match[i], i, j = j, i + 1, j + 1
        elif best[i][j] == best[i + 1][j]:
            i += 1
        else:
            j += 1
    return match


def _apply(chunk: list[_Group], got: list[tuple[str, str]]) -> None:
    """A chunk's translated segments into its groups; an unmatched segment joins the run before it (or after it, at
    the start), so the words read in the translation's order."""
    got = _segments(got)
    targets = [group for group in chunk if group.target()]
    if got == _segments([(group.label, group.text) for group in chunk]) or not targets:
        return  # nothing was translated here (no words), or nowhere to write: left as it is
    match = _align([group.label for group in targets], got)
    lead, texts, at = "", [""] * len(targets), None
    for (_, text), j in zip(got, match):
        at = j if j is not None else at
        if at is None:
            lead += text  # before the first match: it leads that run
        else:
            texts[at] += text
    first = next((j for j in match if j is not None), 0)
    texts[first] = lead + texts[first]
    place = {id(group): i for i, group in enumerate(targets)}
    for group in chunk:
        group.write(texts[place[id(group)]] if id(group) in place else "")


def has_words(paragraph: Paragraph) -> bool:
    return wordy("".join(item.text for item in paragraph if item is not None))


class RunsTranslation:
    """The paragraphs of one document translated together: `texts` to translate (the sentences, and the runs'
    own texts that markup.py looks for to place their spans), then `apply(translations)` writes each run's text
    into its element. Paragraphs without words are left alone.

    Non-text items inside a paragraph (images and drawings, fields, footnote references, tabs, line breaks, math)
    are voids: they cut the sentence there, as markup.py cuts at an image, and stay where they are, never searched
    for in a translation. Adjacent runs that look alike (Word splits runs for spelling marks and revision ids) are
    one span: its translation goes into the first of them that held words, the others are emptied. When a
    translation moves a span before text that came first, the words keep the translation's order and that text
    takes the formatting of the run it lands in: the reading order wins over the look."""

    def __init__(self, paragraphs: list[Paragraph], language: str) -> None:
        numbers = itertools.count()
        kept = [paragraph for paragraph in paragraphs if has_words(paragraph)]
        self._chunks = [_chunks(paragraph, numbers) for paragraph in kept]
        self._html = HtmlTranslation("".join(map(_html, self._chunks)), language, split=True)
        self.texts: list[str] = list(self._html.first)
        self.counts = {"paragraphs": len(kept), "runs": sum(item is not None for p in kept for item in p)}

    def apply(self, translations: list[str]) -> None:
        self._html.second(translations)
        read = _read(self._html.result([]))
        shape = [len(chunks) for chunks in self._chunks]
        if [len(chunks) for chunks in read] != shape:
            raise RuntimeError(f"the translated runs came back as {len(read)} paragraphs, not {len(shape)}")
        for chunks, got in zip(self._chunks, read):
            for chunk, segments in zip(chunks, got):
                _apply(chunk, segments)
        self.counts |= {key: value for key, value in self._html.placements.items() if key in ("matched", "positional")}
