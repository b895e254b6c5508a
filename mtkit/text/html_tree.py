"""An HTML document as a tree whose every character is written back as it was, and that tree as a flat list of
items (texts, inline tags, breaks) for mtkit.text.markup to cut into sentences: which elements are blocks, which
are kept as written (computer text, translate="no", names), where emoji split a text. Stdlib only, besides
mtkit.text.sentences' test for words.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass, field
from html.parser import HTMLParser
from itertools import groupby

from mtkit.text.sentences import wordy

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
KEPT = "kept"  # a protected element with text in it: a break, counted

UNIT = re.compile(r"&(?:#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)|.", re.S)  # as html.unescape reads
_URL = re.compile(r"(?:[a-zA-Z][a-zA-Z0-9+.-]*://|www\.|mailto:)\S+|[\w.-]+\.[a-zA-Z]{2,}(?:/\S*)?")
# Parts of emoji sequences: zero-width joiner, keycap, variation selectors, tag characters (flags of regions)
_JOINERS = frozenset(map(chr, [0x200D, 0x20E3, *range(0xFE00, 0xFE10), *range(0xE0020, 0xE0080)]))
_MAX_DEPTH = 200  # deeper start tags are kept as written, so the recursions here stay short
Item = tuple[str, str, int]  # (kind, as written, for an inline tag its element's key: both its tags share it)


@dataclass
class Element:
    start: str  # the start tag as written; for a comment, declaration or stray end tag, all of it
    name: str = ""  # "" for those
    no_translate: bool = False
    children: list[str | Element] = field(default_factory=list)  # a text child is as written (entities undecoded)
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


def parse(document: str) -> Element:
    """The document as a tree: an end tag closes the nearest open element of its name; a stray one is a token."""
    tokens = _Tokens(document).tokens
    root = Element(document[: tokens[0][0]] if tokens else document)
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
            top.children.append(Element(raw, tag, no))
            stack.append(top.children[-1])
        else:  # void or self-closing, stray end tag, comment, declaration
            top.children.append(Element(raw, tag if kind == "void" else "", no))
    for element in reversed(stack):
        _settle(element)
    return root


def _settle(element: Element) -> None:
    """Once its content is known: whether it holds text to translate (each element looked at once)."""
    element.words = not _protected(element) and any(
        wordy(html.unescape(child)) if isinstance(child, str) else child.words for child in element.children
    )


def _source(node: str | Element) -> str:
    return node if isinstance(node, str) else node.start + "".join(map(_source, node.children)) + node.end


def _text_of(node: str | Element) -> str:
    return html.unescape(node) if isinstance(node, str) else "".join(map(_text_of, node.children))


def _protected(element: Element) -> bool:
    """Kept as written: computer text, translate="no", and links that are names (hashtags, mentions, URLs)."""
    text = _text_of(element).strip()
    return (
        element.name.rpartition(":")[2] in PROTECTED  # MathML or SVG whatever its prefix (<m:math>)
        or element.no_translate
        or element.name == "a"
        and (text.startswith(("#", "@")) or _URL.fullmatch(text) is not None)
    )


def _symbol(unit: str) -> bool:
    """An emoji's part: never ASCII ("^" and "`" are modifier symbols too, but TeX and code need them in place)."""
    return all(
        char in _JOINERS or char > "\x7f" and unicodedata.category(char) in ("So", "Sk") for char in html.unescape(unit)
    )


def flatten(node: str | Element, out: list[Item]) -> None:
    """The tree as items; block tags, emoji and whatever has no words to translate are breaks."""
    if isinstance(node, str):  # emoji and other symbols split a text and are kept as written
        out += [(BREAK if sym else LEAF, "".join(units), 0) for sym, units in groupby(UNIT.findall(node), _symbol)]
    elif not node.words:
        out.append((KEPT if _protected(node) and wordy(_text_of(node)) else BREAK, _source(node), 0))
    else:
        block = node.name in BLOCK or not node.name  # the root too
        out.append((BREAK if block else OPEN, node.start, id(node)))
        for child in node.children:
            flatten(child, out)
        out.append((BREAK if block else CLOSE, node.end, id(node)))
