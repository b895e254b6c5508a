"""HTML translated with its markup kept (LibreTranslate's format "html"): plain-text segments out, the document
back. Pure and stdlib only; it never calls a model, so a server batches the segments of many documents at once.
Placement: a run of text with inline elements is translated whole, and each element's text on its own; when every
element's translation occurs in the whole's (left to right, else in any order, never overlapping), its tags are put
around that occurrence. Otherwise each piece of the run is translated alone and put back in its place.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from itertools import groupby

VOID = frozenset("area base br col embed hr img input keygen link meta param source track wbr".split())
BLOCK = frozenset(
    (
        "address article aside blockquote body br caption center dd details dialog div dl dt fieldset "
        "figcaption figure footer form h1 h2 h3 h4 h5 h6 head header hgroup hr html iframe legend li main "
        "menu nav ol optgroup option p section select summary table tbody td tfoot th thead title tr ul"
    ).split()
)
PROTECTED = frozenset("code pre kbd samp script style textarea svg math".split())  # computer text, or not text
LEAF, OPEN, CLOSE, BREAK = "leaf", "open", "close", "break"  # a run is texts and inline tags between two breaks

_UNIT = re.compile(r"&(?:#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)|.", re.S)  # as html.unescape reads
_SPACE = re.compile(r"[ \t\n\r\f]+")  # HTML white space: a reader sees one space, and a model gets one line
_URL = re.compile(r"(?:[a-zA-Z][a-zA-Z0-9+.-]*://|www\.|mailto:)\S+|[\w.-]+\.[a-zA-Z]{2,}(?:/\S*)?")
# Parts of emoji sequences: zero-width joiner, keycap, variation selectors, tag characters (flags of regions)
_JOINERS = frozenset(map(chr, [0x200D, 0x20E3, *range(0xFE00, 0xFE10), *range(0xE0020, 0xE0080)]))
_MAX_DEPTH = 200  # deeper start tags are kept as written, so the recursions here stay short
Tr = Callable[[str], str]  # a text to its translation


@dataclass
class _Element:
    start: str  # the start tag as written; for a comment, declaration or stray end tag, all of it
    name: str = ""  # "" for those
    no_translate: bool = False
    children: list[str | _Element] = field(default_factory=list)  # a text child is as written (entities undecoded)
    end: str = ""  # "" when the document leaves it open
    words: bool = False  # holds text to translate (outside protected elements)


class _Tokens(HTMLParser):
    """The document's tokens as (offset, kind, tag, translate="no"); a token runs to the next one's offset, so every
    character, even one the parser skips, is written back as it was."""

    def __init__(self, document: str) -> None:
        super().__init__(convert_charrefs=False)
        self.lines = [0] + [match.end() for match in re.finditer("\n", document)]  # getpos() counts "\n" only
        self.tokens: list[tuple[int, str, str, bool]] = []
        self.feed(document)
        self.close()

    def _add(self, kind: str, tag: str = "", attrs: list[tuple[str, str | None]] = ()) -> None:
        line, column = self.getpos()  # where the token being handled starts
        no = any(key == "translate" and (value or "").strip().lower() == "no" for key, value in attrs)
        self.tokens.append((self.lines[line - 1] + column, kind, tag, no))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._add("void" if tag in VOID else "start", tag, attrs)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._add("void", tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        self._add("end", tag)

    def handle_data(self, data: str) -> None:
        self._add("text")

    def handle_comment(self, data: str) -> None:
        self._add("other")

    handle_charref = handle_entityref = handle_data
    handle_decl = handle_pi = unknown_decl = handle_comment


def _parse(document: str) -> _Element:
    """The document as a tree: an end tag closes the nearest open element of its name; a stray one is a token."""
    tokens = _Tokens(document).tokens
    root = _Element(document[: tokens[0][0]] if tokens else document)
    stack = [root]
    for (start, kind, tag, no), end in zip(tokens, [token[0] for token in tokens[1:]] + [len(document)]):
        raw, top = document[start:end], stack[-1]
        if kind == "text" and top.children and isinstance(top.children[-1], str):
            top.children[-1] += raw  # data and character references: one text
        elif kind == "text":
            top.children.append(raw)
        elif kind == "end" and any(element.name == tag for element in stack[1:]):
            while stack[-1].name != tag:
                _settle(stack.pop())  # left open by the document: it ends where its parent ends
            stack[-1].end = raw
            _settle(stack.pop())
        elif kind == "start" and len(stack) < _MAX_DEPTH:
            top.children.append(_Element(raw, tag, no))
            stack.append(top.children[-1])
        else:  # void or self-closing, stray end tag, comment, declaration
            top.children.append(_Element(raw, tag if kind == "void" else "", no))
    for element in reversed(stack):
        _settle(element)
    return root


def _settle(element: _Element) -> None:
    """Once its content is known: whether it holds text to translate (each element looked at once)."""
    element.words = not _protected(element) and any(
        _wordy(html.unescape(child)) if isinstance(child, str) else child.words for child in element.children
    )


def _source(node: str | _Element) -> str:
    return node if isinstance(node, str) else node.start + "".join(map(_source, node.children)) + node.end


def _text_of(node: str | _Element) -> str:
    return html.unescape(node) if isinstance(node, str) else "".join(map(_text_of, node.children))


def _wordy(text: str) -> bool:
    return any(char.isalnum() for char in text)  # letters or digits: something a model can translate


def _protected(element: _Element) -> bool:
    """Kept as written: computer text, translate="no", and links that are names (hashtags, mentions, URLs)."""
    text = _text_of(element).strip()
    return (
        element.name in PROTECTED
        or element.no_translate
        or element.name == "a"
        and (text.startswith(("#", "@")) or _URL.fullmatch(text) is not None)
    )


def _symbol(unit: str) -> bool:
    return all(char in _JOINERS or unicodedata.category(char) in ("So", "Sk") for char in html.unescape(unit))


def _flatten(node: str | _Element, out: list[tuple[str, str]]) -> None:
    """The tree as (kind, as written) items; block tags, emoji and whatever has no words to translate are breaks."""
    if isinstance(node, str):  # emoji and other symbols split a text and are kept as written
        out += [(BREAK if symbol else LEAF, "".join(units)) for symbol, units in groupby(_UNIT.findall(node), _symbol)]
    elif not node.words:
        out.append((BREAK, _source(node)))
    else:
        block = node.name in BLOCK or not node.name  # the root too
        out.append((BREAK if block else OPEN, node.start))
        for child in node.children:
            _flatten(child, out)
        out.append((BREAK if block else CLOSE, node.end))


@dataclass
class _Leaf:
    """A text as written: its white space either side and, between them, what is translated."""

    lead: str
    core: str
    trail: str

    @property
    def text(self) -> str:
        return _SPACE.sub(" ", html.unescape(self.core))

    def render(self, tr: Tr) -> str:
        return self.lead + (html.escape(tr(self.text), quote=False) if _wordy(self.text) else self.core) + self.trail


def _leaf(raw: str) -> _Leaf:
    units = _UNIT.findall(raw)
    words = [i for i, unit in enumerate(units) if not html.unescape(unit).isspace()] or [len(units)]
    first, last = words[0], max(words[-1] + 1, words[0])
    return _Leaf("".join(units[:first]), "".join(units[first:last]), "".join(units[last:]))


def _written(parts: list[str | _Leaf]) -> str:
    return "".join(part if isinstance(part, str) else part.lead + part.core + part.trail for part in parts)


def _groups(kinds: list[str], parts: list[str | _Leaf]) -> list[tuple[str, _Leaf, str]] | None:
    """The run's inline elements as (tags before, text, tags after), if each one is closed in the run and holds
    exactly one text to translate; else None."""
    groups, members, depth = [], [], 0
    for kind, part in zip(kinds, parts):
        members += [part] if depth or kind == OPEN else []
        depth += (kind == OPEN) - (kind == CLOSE)
        if depth < 0 or kind == CLOSE and not part:
            return None  # the end of an element opened before the run, or one the document leaves open
        if depth == 0 and members:
            texts = [i for i, member in enumerate(members) if isinstance(member, _Leaf) and _wordy(member.text)]
            if len(texts) != 1:
                return None
            groups.append((_written(members[: texts[0]]), members[texts[0]], _written(members[texts[0] + 1 :])))
            members = []
    return groups if depth == 0 else None


def find_places(whole: str, parts: list[str]) -> list[int] | None:
    """Where each part occurs in `whole` without overlaps: left to right if it can, else in any order (longest
    part first, so a short one does not take a place inside a longer one's); None if a part is empty or missing."""
    if not all(parts):
        return None
    longest_first = sorted(range(len(parts)), key=lambda i: -len(parts[i]))
    return _assign(whole, parts, range(len(parts)), True) or _assign(whole, parts, longest_first, False)


def _assign(whole: str, parts: list[str], order: Iterable[int], onward: bool) -> list[int] | None:
    """A free place for each part, taken in `order`; `onward`: each one after the one before."""
    taken: list[tuple[int, int]] = []
    places = [0] * len(parts)
    for i in order:
        places[i] = _find(whole, parts[i], taken[-1][1] if onward and taken else 0, taken)
        if places[i] is None:
            return None
        taken.append((places[i], places[i] + len(parts[i])))
    return places


def _find(whole: str, part: str, at: int, taken: list[tuple[int, int]]) -> int | None:
    """The first free place of `part` in `whole` from `at`; one that does not cut a word preferred."""
    free, start = [], whole.find(part, at)
    while start >= 0:
        if all(start + len(part) <= low or start >= high for low, high in taken):
            free.append(start)
        start = whole.find(part, start + 1)

    def cuts(s: int) -> bool:  # a letter or digit at the part's edge touches one outside it
        end = s + len(part)
        pairs = (whole[s - 1 : s] + part[0], part[-1] + whole[end : end + 1])
        return any(len(pair) == 2 and pair.isalnum() for pair in pairs)

    return next((s for s in free if not cuts(s)), free[0] if free else None)


@dataclass
class _Run:
    """Text and inline tags between two breaks; the white space at its edges is kept as written."""

    lead: str
    parts: list[str | _Leaf]  # tags as written, and texts
    trail: str
    leaves: list[_Leaf]  # the texts to translate
    whole: str  # all its text, as a reader sees it
    groups: list[tuple[str, _Leaf, str]] | None  # None: translated piece by piece from the start

    def first(self) -> list[str]:
        if self.groups is None:
            return [leaf.text for leaf in self.leaves]
        return [self.whole] + [leaf.text for _, leaf, _ in self.groups]

    def places(self, tr: Tr) -> list[int] | None:
        if self.groups is None:
            return None
        return find_places(tr(self.whole), [tr(leaf.text) for _, leaf, _ in self.groups])

    def second(self, tr: Tr) -> list[str]:
        return [leaf.text for leaf in self.leaves] if self.places(tr) is None else []  # those not in first

    def render(self, tr: Tr) -> str:
        places = self.places(tr)
        if places is None:
            return self.lead + "".join(p if isinstance(p, str) else p.render(tr) for p in self.parts) + self.trail
        return self.lead + _inject(tr(self.whole), self.groups, places, tr) + self.trail


def _inject(whole: str, groups: list[tuple[str, _Leaf, str]], places: list[int], tr: Tr) -> str:
    """`whole` with each group's tags around its text's translation; white space inside a group's tags stays there,
    and the translation's own space on that side goes."""
    out, at, space_after = [], 0, False
    for start, (before, leaf, after) in sorted(zip(places, groups), key=lambda pair: pair[0]):
        between = whole[at:start].lstrip() if space_after else whole[at:start]
        between = between.rstrip() if leaf.lead else between
        out += [html.escape(between, quote=False), before, leaf.render(tr), after]
        at, space_after = start + len(tr(leaf.text)), bool(leaf.trail)
    return "".join(out) + html.escape(whole[at:].lstrip() if space_after else whole[at:], quote=False)


def _make_run(items: list[tuple[str, str]]) -> _Run:
    parts = [_leaf(raw) if kind == LEAF else raw for kind, raw in items]
    texts = [part for part in parts if isinstance(part, _Leaf)]
    whole = _SPACE.sub(" ", html.unescape(_written(texts))).strip()
    leaves = [leaf for leaf in texts if _wordy(leaf.text)]
    lead = trail = ""  # written around the run's translation, whichever way it is placed
    if isinstance(parts[0], _Leaf):
        lead, parts[0].lead = parts[0].lead, ""
    if isinstance(parts[-1], _Leaf):
        trail, parts[-1].trail = parts[-1].trail, ""
    return _Run(lead, parts, trail, leaves, whole, _groups([k for k, _ in items], parts) if len(leaves) > 1 else None)


def _segment(document: str) -> list[str | _Run]:
    """The document as markup kept as written and runs of text; a document without markup is one run."""
    root, items = _parse(document), []
    if root.start or any(isinstance(child, _Element) for child in root.children):
        _flatten(root, items)
    elif document:
        items = [(LEAF, document)]
    pieces, run = [], []
    for kind, raw in items + [(BREAK, "")]:
        if kind != BREAK:
            run.append((kind, raw))
            continue
        pieces += [_make_run(run), raw] if run else [raw]
        run = []
    return pieces


def _pairs(texts: list[str], translations: list[str]) -> dict[str, str]:
    if len(translations) != len(texts):
        raise ValueError(f"{len(texts)} translations expected, got {len(translations)}")
    return {text: translation.strip() for text, translation in zip(texts, translations)}


class HtmlTranslation:
    """One HTML document's translation in two passes: `first`, then `second(...)`, then `result(...)`."""

    def __init__(self, document: str) -> None:
        self._pieces = _segment(document)
        self._runs = [piece for piece in self._pieces if isinstance(piece, _Run)]
        self.first: list[str] = list(dict.fromkeys(text for run in self._runs for text in run.first()))
        self._known: dict[str, str] = {}
        self._needed: list[str] = []

    def second(self, translations: list[str]) -> list[str]:
        """Given first's translations in order, the texts still needed: pieces of runs whose tags found no place."""
        self._known = _pairs(self.first, translations)
        tr = self._known.__getitem__
        self._needed = list(
            dict.fromkeys(text for run in self._runs for text in run.second(tr) if text not in self._known)
        )
        return list(self._needed)

    def result(self, translations: list[str]) -> str:
        """Given second's translations in order, the translated document."""
        tr = (self._known | _pairs(self._needed, translations)).__getitem__
        return "".join(piece if isinstance(piece, str) else piece.render(tr) for piece in self._pieces)


def translate_html(document: str, translate: Callable[[list[str]], list[str]]) -> str:
    """Both passes with a synchronous `translate` (a list of texts to their translations, in order)."""
    job = HtmlTranslation(document)
    needed = job.second(translate(job.first) if job.first else [])
    return job.result(translate(needed) if needed else [])
