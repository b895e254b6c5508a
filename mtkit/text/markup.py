"""HTML translated with its markup kept (LibreTranslate's format "html"): plain-text sentences out, the document
back. Pure (no model call, so a server batches the sentences of many documents at once); beyond the stdlib it uses
only mtkit.text.sentences and mtkit.text.html_tree, which parses the document and flattens it into items.

A run (text and inline tags between two block breaks) is cut into sentences, each translated whole whatever inline
tags fall inside it; white space and tags between sentences stay as written. Per sentence, when every element in
it has both tags in it, each element's own text is translated too and its tags go around that translation's place
in the sentence's (find_places, the one nearest where it stood; a nested element inside its parent's). Otherwise
(an element crossing the sentence's edge or left open, a translation not found) every tag of the sentence goes at
the same share of the translation's words as of the source's (of its characters inside a word, or without spaces
between words): the tags keep their order, so the markup stays balanced, and no sentence is translated in pieces.
Protected elements (code, translate="no", names: html_tree) cut the sentence there, as emoji and images do: the
model never sees them, so they come back byte for byte with no search in its output. A document without markup is
one run whose line breaks also end sentences.
"""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mtkit.text.html_tree import BREAK, CLOSE, KEPT, LEAF, OPEN, UNIT, Element, Item, flatten, parse
from mtkit.text.sentences import Segmented, split_sentences, wordy

_SPACE = " \t\n\r\f"  # HTML white space: a reader sees one space, and a model gets one line
_LETTERS = re.compile(r"[^\W_]+")  # a word, for placing a tag at its edge
Tr = Callable[[str], str]  # a text to its translation
OUTSIDE, MATCHED, POSITIONAL = "outside", "matched", "positional"  # how an element's tags were placed, best first


def find_places(
    whole: str, parts: list[str], near: list[float] | None = None, whole_words: list[bool] | None = None
) -> list[int] | None:
    """Where each part occurs in `whole` without overlaps: left to right if it can, else in any order (longest
    part first, so a short one does not take a place inside a longer one's); None if a part is empty or missing.
    Of a part's free places, one that cuts no word is preferred (unless its `whole_words` is False: its source cut
    one), then the first, or the nearest to its `near`."""
    if not all(parts):
        return None
    hints = list(zip(near or [0.0] * len(parts), whole_words or [True] * len(parts)))
    longest_first = sorted(range(len(parts)), key=lambda i: -len(parts[i]))
    return _assign(whole, parts, hints, range(len(parts)), True) or _assign(whole, parts, hints, longest_first, False)


def _assign(
    whole: str, parts: list[str], hints: list[tuple[float, bool]], order: Iterable[int], onward: bool
) -> list[int] | None:
    """A free place for each part, taken in `order`; `onward`: each one after the one before."""
    taken: list[tuple[int, int]] = []
    places = [0] * len(parts)
    for i in order:
        places[i] = _find(whole, parts[i], taken[-1][1] if onward and taken else 0, taken, hints[i])
        if places[i] is None:
            return None
        taken.append((places[i], places[i] + len(parts[i])))
    return places


def _find(whole: str, part: str, at: int, taken: list[tuple[int, int]], hint: tuple[float, bool]) -> int | None:
    """The free place of `part` in `whole` from `at` nearest to `near`; one that does not cut a word preferred
    when `whole_words`."""
    near, whole_words = hint
    free, start = [], whole.find(part, at)
    while start >= 0:
        if all(start + len(part) <= low or start >= high for low, high in taken):
            free.append(start)
        start = whole.find(part, start + 1)
    pool = [s for s in free if not (whole_words and _cuts(whole, s, part))] or free
    return min(pool, key=lambda s: abs(s - near)) if pool else None


def _cuts(whole: str, start: int, part: str) -> bool:
    """Whether `part` at `start` cuts a word: a letter or digit at its edge touches one outside it."""
    end = start + len(part)
    pairs = (whole[start - 1 : start] + part[:1], part[-1:] + whole[end : end + 1])
    return any(len(pair) == 2 and pair.isalnum() for pair in pairs)


@dataclass
class _Tag:
    offset: int  # where it stands in its sentence's text
    raw: str  # as written
    key: int  # its element's
    opens: bool


@dataclass
class _Span:
    """An element with both tags in one sentence: its text is sentence[low:high], its own elements inside it."""

    start: str
    key: int
    low: int
    end: str = ""
    high: int = 0
    children: list[_Span] = field(default_factory=list)


@dataclass
class _Sentence:
    """One sentence of a run: what the model gets, and the inline tags among its words."""

    text: str  # as the model gets it
    first: int  # its run's atoms, first and last, with the tags next to them that it takes in (_widen)
    last: int
    tags: list[_Tag]
    spans: list[_Span] | None  # None: a tag's element is not all in it, so its tags are placed by position

    def texts(self) -> list[str]:
        """What placement looks for in the sentence's translation: each element's own translation."""
        out, todo = [], list(self.spans or [])
        while todo:
            span = todo.pop(0)
            out.append(self.text[span.low : span.high].strip())
            todo += span.children
        return out

    def render(self, tr: Tr, placed: dict[int, str]) -> str:
        target = tr(self.text)
        events = None if self.spans is None else _matched(self.text, target, self.spans, tr)
        status = POSITIONAL if events is None else MATCHED
        if events is None:
            events = list(zip(_positions(self.text, target, self.tags), [tag.raw for tag in self.tags]))
        for tag in self.tags:
            _mark(placed, tag.key, status)
        out, at = [], 0
        for place, raw in events:
            out += [html.escape(target[at:place], quote=False), raw]
            at = place
        return "".join(out) + html.escape(target[at:], quote=False)


def _mark(placed: dict[int, str], key: int, status: str) -> None:
    """An element is counted by the worse placement of its two tags."""
    order = (OUTSIDE, MATCHED, POSITIONAL)
    placed[key] = max(placed.get(key, OUTSIDE), status, key=order.index)


def _spans(tags: list[_Tag]) -> list[_Span] | None:
    """The sentence's elements as a tree, if each one's tags are both in the sentence; else None."""
    roots: list[_Span] = []
    stack: list[_Span] = []
    for tag in tags:
        if tag.opens:
            span = _Span(tag.raw, tag.key, tag.offset)
            (stack[-1].children if stack else roots).append(span)
            stack.append(span)
        elif stack and stack[-1].key == tag.key and tag.raw:  # an element left open ("") ends with its parent
            span = stack.pop()
            span.end, span.high = tag.raw, tag.offset
        else:
            return None
    return None if stack else roots


def _matched(source: str, target: str, spans: list[_Span], tr: Tr) -> list[tuple[int, str]] | None:
    """The tags around their elements' translations in `target`, in the order they are written; None if one is
    not found."""
    placing = _Placing(source, target, tr)
    if not placing.place(spans, (0, len(source)), (0, len(target)), 0):
        return None
    return [(place, raw) for place, *_, raw in sorted(placing.events)]


@dataclass
class _Placing:
    """A sentence's elements put around their own translations in the sentence's: each tag as an event."""

    source: str
    target: str
    tr: Tr
    events: list[tuple[int, int, int, int, str]] = field(default_factory=list)  # (place, end 0 or start 1, ...)

    def place(self, spans: list[_Span], outer: tuple[int, int], bounds: tuple[int, int], depth: int) -> bool:
        """Each span around its translation's place inside target[low:high] (the one nearest its share of the
        source's `outer` when it occurs more than once), its children inside that; False if one is missing. The
        translation's white space next to it is taken inside its tags as far as the source had some there."""
        (src_low, src_high), (low, high) = outer, bounds
        texts = [self.source[span.low : span.high] for span in spans]
        parts = [self.tr(text.strip()) for text in texts]
        near = [(span.low - src_low) * (high - low) / max(src_high - src_low, 1) for span in spans]
        starts = [span.low + len(text) - len(text.lstrip()) for span, text in zip(spans, texts)]
        whole_words = [not _cuts(self.source, start, text.strip()) for start, text in zip(starts, texts)]
        places = find_places(self.target[low:high], parts, near, whole_words)
        if places is None:
            return False
        found = sorted(zip([low + place for place in places], parts, spans, texts), key=lambda each: each[0])
        edge = low  # where the span before ends: white space taken in never crosses it
        for i, (start, part, span, text) in enumerate(found):
            end = start + len(part)
            if not self.place(span.children, (span.low, span.high), (start, end), depth + 1):
                return False
            lead, trail = len(text) - len(text.lstrip()), len(text) - len(text.rstrip())
            while lead and start > edge and self.target[start - 1].isspace():
                start, lead = start - 1, lead - 1
            stop = found[i + 1][0] if i + 1 < len(found) else high
            while trail and end < stop and self.target[end].isspace():
                end, trail = end + 1, trail - 1
            # at one place: ends before starts, an inner end before an outer one, an outer start before an inner one
            count = len(self.events)
            self.events += [(start, 1, depth, count, span.start), (end, 0, -depth, count + 1, span.end)]
            edge = end
        return True


def _positions(source: str, target: str, tags: list[_Tag]) -> list[int]:
    """Where each tag goes in the translation, in order. A tag at a word's edge goes at the same share of the
    translation's words as of the source's before it, at a word's start (or end, as it stood); one inside a word,
    or in a translation without spaces between words (Chinese, Japanese), at the same share of its characters; a
    translation of one word in a script with spaces has the word's edges ("see" -> "siehe": never "s<a>iehe").
    Never before the tag before it: the tags keep their order, so their nesting."""
    one_word = len(_LETTERS.findall(target)) == 1 and not any(unicodedata.category(c) == "Lo" for c in target)
    words = list(_LETTERS.finditer(target)) if one_word or any(char.isspace() for char in target) else []
    source_words = list(_LETTERS.finditer(source))
    places, at = [], 0
    for tag in tags:
        before = tag.offset > 0 and source[tag.offset - 1].isalnum()
        after = tag.offset < len(source) and source[tag.offset].isalnum()
        if words and before != after:
            edges = [word.start() for word in words] + [len(target)] if after else [0] + [w.end() for w in words]
            count = sum(word.end() <= tag.offset for word in source_words)  # the words before it
            place = edges[round(count * len(words) / len(source_words))]
            at = place if place >= at else next((edge for edge in edges if edge >= at), at)
        else:
            at = max(round(tag.offset * len(target) / len(source)), at)
        places.append(at)
    return places


@dataclass
class _Run:
    """Text and inline tags between two breaks, as atoms (a character or an entity as written, or a tag), and the
    sentences to translate in it; the rest of its atoms (white space, tags between sentences) stay as written."""

    atoms: list[Item]
    sentences: list[_Sentence]

    def render(self, tr: Tr, placed: dict[int, str]) -> str:
        out, at = [], 0
        for sentence in self.sentences:
            out += [self._written(at, sentence.first, placed), sentence.render(tr, placed)]
            at = sentence.last + 1
        return "".join(out) + self._written(at, len(self.atoms), placed)

    def _written(self, low: int, high: int, placed: dict[int, str]) -> str:
        for kind, _, key in self.atoms[low:high]:
            if kind != LEAF:
                _mark(placed, key, OUTSIDE)
        return "".join(raw for _, raw, _ in self.atoms[low:high])


def _make_run(items: list[Item], language: str, split: bool, lines: bool) -> _Run:
    atoms = [atom for item in items for atom in _atoms(item)]
    text, origin = _visible(atoms, lines)
    whole = text.strip()
    segmented = split_sentences(whole, language) if split else Segmented("", [whole], [""])
    partners = _partners(atoms)
    sentences, at = [], len(text) - len(text.lstrip()) + len(segmented.lead)
    for source, gap in zip(segmented.sources, segmented.gaps):
        if wordy(source):  # one without letters or digits stays as written
            first, last = _widen(atoms, partners, origin[at], origin[at + len(source) - 1])
            tags = [
                _Tag(min(max(bisect_left(origin, i) - at, 0), len(source)), raw, key, kind == OPEN)
                for i, (kind, raw, key) in enumerate(atoms[first : last + 1], first)
                if kind != LEAF
            ]
            sentences.append(_Sentence(source, first, last, tags, _spans(tags)))
        at += len(source) + len(gap)
    return _Run(atoms, sentences)


def _atoms(item: Item) -> list[Item]:
    kind, raw, key = item
    return [(LEAF, unit, 0) for unit in UNIT.findall(raw)] if kind == LEAF else [item]


def _visible(atoms: list[Item], lines: bool) -> tuple[str, list[int]]:
    """The run's text as a reader sees it, entities decoded, each run of HTML white space one space (with `lines`,
    one holding a line break is a line break, which ends a sentence), and for each character the atom it is in."""
    chars: list[str] = []
    origin: list[int] = []
    space = False  # the last character is white space standing for a run of it
    for i, (kind, raw, _) in enumerate(atoms):
        for char in (html.unescape(raw) if raw.startswith("&") else raw) if kind == LEAF else "":
            line = lines and char in "\r\n"
            if char not in _SPACE:
                chars.append(char)
                origin.append(i)
            elif not space:
                chars.append("\n" if line else " ")
                origin.append(i)
            elif line:
                chars[-1] = "\n"
            space = char in _SPACE
    return "".join(chars), origin


def _partners(atoms: list[Item]) -> dict[int, int]:
    """Each inline tag's other tag when both are in the run; an element left open ("" as its end) has none: it
    ends where its parent does, so it never moves as a pair."""
    opened: dict[int, int] = {}
    partners: dict[int, int] = {}
    for i, (kind, raw, key) in enumerate(atoms):
        if kind == OPEN:
            opened[key] = i
        elif kind == CLOSE and raw and key in opened:
            partners[i], partners[opened[key]] = opened[key], i
    return partners


def _widen(atoms: list[Item], partners: dict[int, int], first: int, last: int) -> tuple[int, int]:
    """A sentence's atoms from its first character's to its last's, and the tags right next to them whose other tag
    is inside (a bold first word's start tag, a link's end tag after the last word): placed with the sentence."""
    while True:
        if first and atoms[first - 1][0] == OPEN and first <= partners.get(first - 1, -1) <= last:
            first -= 1
        elif last + 1 < len(atoms) and atoms[last + 1][0] == CLOSE and first <= partners.get(last + 1, -1) <= last:
            last += 1
        else:
            return first, last


def _segment(document: str, language: str, split: bool) -> tuple[list[str | _Run], int]:
    """The document as markup kept as written and runs of text, and how many protected elements it holds; a
    document without markup is one run."""
    root, items = parse(document), []
    plain = not root.start and not any(isinstance(child, Element) for child in root.children)
    if not plain:
        flatten(root, items)
    elif document:
        items = [(LEAF, document, 0)]
    pieces: list[str | _Run] = []
    run: list[Item] = []
    for kind, raw, key in items + [(BREAK, "", 0)]:
        if kind in (LEAF, OPEN, CLOSE):
            run.append((kind, raw, key))
            continue
        pieces += [_make_run(run, language, split, plain and split), raw] if run else [raw]
        run = []
    return pieces, sum(kind == KEPT for kind, _, _ in items)


def _pairs(texts: list[str], translations: list[str]) -> dict[str, str]:
    if len(translations) != len(texts):
        raise ValueError(f"{len(texts)} translations expected, got {len(translations)}")
    return {text: translation.strip() for text, translation in zip(texts, translations)}


class HtmlTranslation:
    """One HTML document's translation in two passes: `first`, then `second(...)`, then `result(...)`.

    `first`: the texts to translate, each once: the sentences (plain text, entities decoded, white space as one
    space), with `split` False each run whole instead, then the texts of the elements inside them (see the module
    docstring). `second(translations)`: given first's, the texts still needed; none any more (no sentence is
    translated in pieces), kept so that callers stay the same. `result(translations)`: given second's, the document.
    `placements` after result: "tags" (inline elements with a tag in a run) = "outside" (tags between sentences or
    around whole ones, as written) + "matched" + "positional"; "protected" (kept as written, never sent) and
    "sentences" (translated, repeats included)."""

    def __init__(self, document: str, language: str = "en", split: bool = True) -> None:
        self._pieces, protected = _segment(document, language, split)
        self._runs = [piece for piece in self._pieces if isinstance(piece, _Run)]
        sentences = [sentence for run in self._runs for sentence in run.sentences]
        texts = [sentence.text for sentence in sentences] + [text for each in sentences for text in each.texts()]
        self.first: list[str] = list(dict.fromkeys(texts))
        self.placements: dict[str, int] = dict.fromkeys(("tags", OUTSIDE, MATCHED, POSITIONAL), 0)
        self.placements |= {"protected": protected, "sentences": len(sentences)}
        self._known: dict[str, str] = {}

    def second(self, translations: list[str]) -> list[str]:
        """Given first's translations in order, the texts still needed: none."""
        self._known = _pairs(self.first, translations)
        return []

    def result(self, translations: list[str]) -> str:
        """Given second's translations in order (none), the translated document."""
        _pairs([], translations)
        placed: dict[int, str] = {}
        tr = self._known.__getitem__
        out = "".join(piece if isinstance(piece, str) else piece.render(tr, placed) for piece in self._pieces)
        ways = list(placed.values())
        self.placements |= {"tags": len(ways)} | {way: ways.count(way) for way in (OUTSIDE, MATCHED, POSITIONAL)}
        return out
