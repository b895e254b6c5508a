"""Text wrapped by hand at a fixed width, as a program's help texts and messages are: its soft line breaks (a line
broken only because the next word did not fit) found and taken out, so that a sentence reaches the model whole
rather than in line-long pieces, and the translation wrapped again at the source's width and indent.

A break is soft where the next line goes on at the column the paragraph's text starts at (an option's description
column, or the first line's indent) and is no option line itself, and either the paragraph is an option's
description or the line plus the next line's first word would overrun the widest line of the text, itself at least
MIN_WIDTH wide: a short line ("Usage: %s FILE") ends where its writer ended it.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from mtkit.text.sentences import option_column

MIN_WIDTH = 60  # help texts are wrapped at 72 to 80 columns; narrower lines were ended by hand
_LINES = re.compile(r"[^\n]*\n|[^\n]+")


@dataclass(frozen=True)
class Wrap:
    """A paragraph joined onto one line of the unwrapped text: that line's number, the characters at its start kept
    as written (indent and option column), the indent its continuation lines take, and the width to wrap it at."""

    line: int
    prefix: int
    indent: int
    width: int


def _text_column(line: str) -> int:
    """Where a line's text starts: after its option column (and the spaces after it), else after its indent."""
    return option_column(line) or len(line) - len(line.lstrip(" "))


def _soft(line: str, after: str, column: int, described: bool, width: int) -> bool:
    """Whether the break between `line` and `after` is soft, in a paragraph whose text starts at `column`."""
    body = after.rstrip("\n")
    text = body.lstrip(" ")
    if not text.split() or "\t" in line or len(body) - len(text) != column or option_column(body):
        return False
    if described:
        return True
    return width >= MIN_WIDTH and len(line.rstrip("\n")) + 1 + len(text.split()[0]) > width


@dataclass(frozen=True)
class Unwrapped:
    """A text with its soft line breaks taken out (`text`, of `lines` lines) and its joined paragraphs."""

    text: str
    wraps: tuple[Wrap, ...] = ()
    lines: int = 0

    def rewrapped(self, translation: str) -> str:
        """A translation of `text` with each joined paragraph wrapped again at its width, its continuation lines at
        its indent; kept as it is where its lines no longer match the source's (a paragraph's prefix changed, a
        line break gained or lost)."""
        found = _LINES.findall(translation)
        if not self.wraps or len(found) != self.lines:
            return translation
        for wrap in self.wraps:
            found[wrap.line] = _filled(found[wrap.line], wrap)
        return "".join(found)


def _filled(line: str, wrap: Wrap) -> str:
    body = line.rstrip("\n")
    head, rest = body[: wrap.prefix], body[wrap.prefix :]
    if head.strip(" ") and option_column(head) != len(head) or not rest.strip():
        return line
    filled = textwrap.fill(
        rest,
        width=wrap.width,
        initial_indent=head,
        subsequent_indent=" " * wrap.indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return filled + line[len(body) :]


def unwrapped(text: str) -> Unwrapped:
    """`text` with each paragraph's soft line breaks and the continuation indent after them taken out (one space
    instead), and what wraps a translation of it again."""
    lines = _LINES.findall(text)
    width = max((len(line.rstrip("\n")) for line in lines), default=0)
    out: list[str] = []
    wraps: list[Wrap] = []
    k = 0
    while k < len(lines):
        first = lines[k]
        column = _text_column(first.rstrip("\n"))
        described = option_column(first.rstrip("\n")) > 0
        joined, widest, end = first, len(first.rstrip("\n")), k + 1
        while (
            end < len(lines) and joined.endswith("\n") and _soft(lines[end - 1], lines[end], column, described, width)
        ):
            widest = max(widest, len(lines[end].rstrip("\n")))
            joined = joined[:-1] + " " + lines[end][column:]
            end += 1
        if end > k + 1:
            wraps.append(Wrap(len(out), column, column, widest))
        out.append(joined)
        k = end
    return Unwrapped("".join(out), tuple(wraps), len(out))
