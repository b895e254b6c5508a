"""XLIFF 1.2 and 2.0/2.1 files as Jobs: each unit (1.2) or segment (2.x) without a target gets one, in the state the
specification gives a machine translation (1.2: needs-review-translation, but translated and exact-match where a
translation memory's 100% matches gave it: Job.exact); translate="no", existing targets, notes and everything else
are kept. Inline codes cross the model as mtkit.text.protect's stand-ins, each put back once: a paired code (<g>,
<pc>, <mrk>) around the words it held, a standalone one (<x/>, <ph>, <bpt>, <sc/>, ...) where its stand-in came
back."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass

from lxml import etree

from mtkit.documents.job import DocumentError, Job
from mtkit.documents.safety import parse_xml, write_xml
from mtkit.documents.ui_strings import ALWAYS, UNFLAGGED, Prepared, prepare

V1 = ("urn:oasis:names:tc:xliff:document:1.2", "urn:oasis:names:tc:xliff:document:1.1")
V2 = "urn:oasis:names:tc:xliff:document:2.0"  # 2.1 keeps 2.0's namespace
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
EXACT = {"state": "translated", "state-qualifier": "exact-match"}  # XLIFF 1.2's words for a 100% memory match
PAIRED = {"g", "mrk", "pc"}  # codes around text: the text is translated, the code put around its translation
_OPEN, _CLOSE, _ALONE = "\ue000", "\ue001", "\ue002"  # a code's marks in the text, each followed by its number
_MARK = re.compile("([\ue000\ue001\ue002])([\ue100-\uefff])")
_PATTERN = re.compile(f"{_MARK.pattern}|{ALWAYS}|{UNFLAGGED}")


@dataclass
class _Segment:
    """A source to translate and where its translation goes: the target element (made empty or new)."""

    source: etree._Element
    parent: etree._Element  # the unit (1.2) or segment (2.x) the target belongs in
    after: etree._Element  # the element the target follows when it is new
    target: etree._Element | None
    attributes: dict[str, str]  # set on the target (1.2) or on the segment (2.x: its state)


def xliff_job(data: bytes, name: str, language: str, target: str = "") -> Job:
    """The file's sources without a target, translated from `language`; `target` names the target language where
    the file does not."""
    root = parse_xml(data, name)
    namespace = etree.QName(root).namespace
    if etree.QName(root).localname != "xliff" or namespace not in (*V1, V2):
        raise DocumentError(f"{name}: not XLIFF 1.2 or 2.x (the root is {root.tag!r})")
    segments = _segments_2(root, name, target) if namespace == V2 else _segments_1(root, target)
    flat = [_flatten(segment.source) for segment in segments]
    prepared: dict[str, Prepared] = {}
    for text, _ in flat:
        if text not in prepared:
            prepared[text] = prepare(text, language, _PATTERN)
    texts = list(dict.fromkeys(text for each in prepared.values() for text in each.texts))

    def finish(translations: list[str]) -> bytes:
        if len(translations) != len(texts):
            raise ValueError(f"{len(texts)} translations expected, got {len(translations)}")
        found = dict(zip(texts, translations))
        for segment, (text, codes) in zip(segments, flat):
            review = "state-qualifier" in segment.attributes  # 1.2's; 2.x has no state a 100% match would change
            whole = None if codes else job.answered.get(text)  # a memory's text has no inline codes to place
            if review and (whole is not None or all(t in job.exact for t in prepared[text].texts)):
                segment.attributes.update(EXACT)
            written = whole if whole is not None else prepared[text].translation(found, _PATTERN)
            reviewed = None if whole is not None or codes else job.for_review(text, written, _PATTERN)
            _write(segment, written if reviewed is None else reviewed, codes)
        return write_xml(root, data)

    units = list(dict.fromkeys(text for text, codes in flat if not codes))
    job = Job(texts, finish, {"segments": len(segments), "sentences": len(texts)}, units=units)  # run_jobs: exact
    return job


def _no(element: etree._Element) -> bool:
    return element.get("translate", "").strip().lower() == "no"


def _segments_1(root: etree._Element, target: str) -> list[_Segment]:
    """XLIFF 1.2: every trans-unit not translate="no" (itself or a group or file around it) whose target is empty."""
    namespace = etree.QName(root).namespace
    q = f"{{{namespace}}}"
    found = []
    for file in root.iter(q + "file"):
        if target and not file.get("target-language"):
            file.set("target-language", target)
        lang = file.get("target-language", "")
        for unit in file.iter(q + "trans-unit"):
            if any(_no(element) for element in unit.iterancestors()) or _no(unit):
                continue
            source, existing = unit.find(q + "source"), unit.find(q + "target")
            if source is None or _filled(existing) or not _has_words(source):
                continue
            attributes = {"state": "needs-review-translation", "state-qualifier": "mt-suggestion"}
            if lang:
                attributes[XML_LANG] = lang
            after = unit.find(q + "seg-source")
            found.append(_Segment(source, unit, after if after is not None else source, existing, attributes))
    return found


def _segments_2(root: etree._Element, name: str, target: str) -> list[_Segment]:
    """XLIFF 2.x: every segment (not an ignorable) of a unit not translate="no" whose target is empty."""
    q = f"{{{V2}}}"
    if not root.get("trgLang"):
        if not target:
            raise DocumentError(f"{name}: the file names no target language (trgLang): give the target language")
        root.set("trgLang", target)
    found = []
    for unit in root.iter(q + "unit"):
        if _no(unit) or any(_no(element) for element in unit.iterancestors()):
            continue
        for segment in unit.iter(q + "segment"):
            source, existing = segment.find(q + "source"), segment.find(q + "target")
            if source is None or _filled(existing) or not _has_words(source):
                continue
            state = {} if segment.get("state") not in (None, "initial") else {"state": "translated"}
            found.append(_Segment(source, segment, source, existing, state))
    return found


def _filled(target: etree._Element | None) -> bool:
    return target is not None and (bool((target.text or "").strip()) or len(target) > 0)


def _has_words(source: etree._Element) -> bool:
    return any(char.isalpha() for char in "".join(source.itertext()))


def _local(element: etree._Element) -> str:
    return etree.QName(element).localname if isinstance(element.tag, str) else ""


def _flatten(source: etree._Element) -> tuple[str, list[etree._Element]]:
    """The source's text with each inline code as marks (a paired code's open and close around its text, a
    standalone one's single mark) and the codes in the order of their numbers."""
    codes: list[etree._Element] = []
    pieces: list[str] = [source.text or ""]

    def walk(element: etree._Element) -> None:
        for child in element:
            number = chr(0xE100 + len(codes))
            codes.append(child)
            if not isinstance(child.tag, str):  # a comment or processing instruction: kept where it stood
                pieces.append(_ALONE + number)
            elif _local(child) in PAIRED and not _no(child) and child.get("mtype") != "protected":
                pieces.append(_OPEN + number + (child.text or ""))
                walk(child)
                pieces.append(_CLOSE + number)
            else:
                pieces.append(_ALONE + number)
            pieces.append(child.tail or "")

    walk(source)
    if len(codes) > 0xE00:
        raise DocumentError("an XLIFF segment with more than 3584 inline codes")
    return "".join(pieces), codes


def _write(segment: _Segment, translation: str, codes: list[etree._Element]) -> None:
    """The translation into the segment's target, its codes rebuilt around and between its words."""
    target = segment.target
    if target is None:
        target = etree.Element(segment.source.tag.replace("source", "target"))
        target.tail = segment.after.tail
        segment.after.addnext(target)
    for child in list(target):
        target.remove(child)
    target.text = None
    holder = segment.parent if _local(segment.parent) == "segment" else target
    for key, value in segment.attributes.items():
        holder.set(key, value)
    if not _balanced(translation):  # the codes in the source's order after the words: valid, if less well placed
        marks = sorted(_MARK.findall(translation), key=_order)
        translation = _MARK.sub("", translation) + "".join(kind + number for kind, number in marks)
    stack = [target]
    last: etree._Element | None = None
    for token in _tokens(translation):
        if isinstance(token, str):
            if last is None:
                stack[-1].text = (stack[-1].text or "") + token
            else:
                last.tail = (last.tail or "") + token
            continue
        kind, number = token
        if kind == _CLOSE:
            last = stack.pop()
            continue
        code = codes[number]
        made = copy.deepcopy(code) if kind == _ALONE else etree.Element(code.tag, dict(code.attrib), code.nsmap)
        made.tail = None
        if kind == _OPEN:
            made.text = None
        stack[-1].append(made)
        last = None if kind == _OPEN else made
        if kind == _OPEN:
            stack.append(made)


def _order(mark: tuple[str, str]) -> tuple[int, int]:
    kind, number = mark
    return ord(number), {_OPEN: 0, _ALONE: 1, _CLOSE: 2}[kind]


def _tokens(text: str) -> Iterator[str | tuple[str, int]]:
    at = 0
    for match in _MARK.finditer(text):
        if match.start() > at:
            yield text[at : match.start()]
        yield match.group(1), ord(match.group(2)) - 0xE100
        at = match.end()
    if at < len(text):
        yield text[at:]


def _balanced(text: str) -> bool:
    """Every paired code opened before it closes, the inner ones closed first."""
    stack = []
    for kind, number in _MARK.findall(text):
        if kind == _OPEN:
            stack.append(number)
        elif kind == _CLOSE and (not stack or stack.pop() != number):
            return False
    return not stack
