"""A text as the sentences a model translates and the white space between them, kept as written.

Sentences come from sentencex (Wikimedia's splitter: rules and abbreviation lists per language, a fallback chain for
the others; chosen over pySBD by accuracy on Multi30k paragraphs, language coverage and speed, docs/translating.md).
Every line break ends a sentence. A sentence longer than a model's input limit is cut at a clause boundary, else
at a word boundary, else between characters, into pieces that each fit: nothing is dropped or truncated, and
`Segmented.join` of the sources gives the text back byte for byte.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from sentencex import segment

# Where a clause may end: after a comma, semicolon, colon or closing bracket, or around a dash, before white space.
_CLAUSE = re.compile(r"(?<=[,;:\)\]\u3001\uff0c\uff1b\uff1a])\s+|\s+(?=[\u2013\u2014-]\s)|(?<=\s[\u2013\u2014-])\s+")
_SPACE = re.compile(r"\s+")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
# A command-line help line's option column ("  -b, --bytes=SIZE      print SIZE in bytes"): options, each with its
# argument (`=SIZE`, `[=WHEN]`, ` FILE`, ` <num>`), after one another, then a tab or two spaces and the description,
# or nothing (a column alone on its line). The column is kept as written with the white space around the text, never
# sent: a model reads it as a sentence and drops the description after it, or rewrites the options.
_OPTION = r"--?[A-Za-z0-9?][\w-]*(?:\[?=[^\s,\]]+\]?|\s(?:[A-Z][A-Z_]+|<[\w-]+>|\[[A-Z_]+\]))?"
_OPTION_COLUMN = re.compile(rf"[ \t]*{_OPTION}(?:,?[ \t]+{_OPTION}|,{_OPTION})*(?:[ \t]{{2,}}|\t|[ \t]*(?=[\r\n]|$))")
Count = Callable[[list[str]], list[int]]  # texts -> their lengths in the model's tokens


@dataclass
class Segmented:
    """A text as `lead`, then each source followed by its gap: lead + s0 + g0 + s1 + g1 ... is the text."""

    lead: str
    sources: list[str]  # no white space at either end; a text of white space only has none
    gaps: list[str]

    def join(self, translations: list[str]) -> str:
        """The text with each source replaced by its translation, white space and line breaks as written."""
        if len(translations) != len(self.sources):
            raise ValueError(f"{len(self.sources)} translations expected, got {len(translations)}")
        return self.lead + "".join(t + gap for t, gap in zip(translations, self.gaps))


def split_sentences(text: str, language: str) -> Segmented:
    """`text` as sentences of `language` (an ISO 639 code; sentencex falls back to a related language or English
    for one it lacks) with the white space between them."""
    pieces: list[tuple[str, str]] = []  # (white space before, sentence)
    space = ""
    for line in _LINE.findall(text):
        column = option_column(line)
        space, line = space + line[:column], line[column:]
        for chunk in segment(language, line) if line.strip() else [line]:
            core = chunk.strip()
            if not core:
                space += chunk
                continue
            start = chunk.index(core)
            pieces.append((space + chunk[:start], core))
            space = chunk[start + len(core) :]
    if not pieces:
        return Segmented(text, [], [])
    lead = pieces[0][0]
    gaps = [before for before, _ in pieces[1:]] + [space]
    result = Segmented(lead, [core for _, core in pieces], gaps)
    if result.join(result.sources) != text:  # the splitter changed a character: the text is one sentence
        core = text.strip()
        start = text.index(core)
        return Segmented(text[:start], [core], [text[start + len(core) :]])
    return result


def cut_long(sentence: str, count: Count, limit: int) -> tuple[list[str], list[str]]:
    """A sentence as pieces of at most `limit` tokens and the white space after each ("" after the last), cut in
    halves at the clause boundary nearest the middle, else the word boundary, else the character; a single
    character over the limit stays whole."""
    if len(sentence) < 2 or count([sentence])[0] <= limit:
        return [sentence], [""]
    left, space, right = halves(sentence) or _character_halves(sentence)
    pieces, gaps = cut_long(left, count, limit)
    more, more_gaps = cut_long(right, count, limit)
    return pieces + more, gaps[:-1] + [space] + more_gaps


def halves(sentence: str) -> tuple[str, str, str] | None:
    """The sentence cut in two at the clause boundary nearest its middle, else at the sentence start nearest it
    (`_sentence_starts`), else at the word boundary: (left, white space between, right), neither side empty; None
    for a single word."""
    middle = len(sentence) / 2
    spaces = [m for m in _SPACE.finditer(sentence) if 0 < m.start() and m.end() < len(sentence)]
    capitals = _sentence_starts(sentence)
    clauses = [m for m in _CLAUSE.finditer(sentence) if 0 < m.start() and m.end() < len(sentence)]
    for cuts in (clauses, capitals, spaces):
        if cuts:
            best = min(cuts, key=lambda m: abs((m.start() + m.end()) / 2 - middle))
            return sentence[: best.start()], best.group(), sentence[best.end() :]
    return None


def fused_halves(sentence: str) -> tuple[str, str, str] | None:
    """The sentence cut at the sentence start nearest its middle (`_sentence_starts`): where two sentences meet
    when the first lacks its full stop ("in a city The man"); None without such a place."""
    middle = len(sentence) / 2
    capitals = _sentence_starts(sentence)
    if not capitals:
        return None
    best = min(capitals, key=lambda m: abs((m.start() + m.end()) / 2 - middle))
    return sentence[: best.start()], best.group(), sentence[best.end() :]


def _sentence_starts(sentence: str) -> list[re.Match[str]]:
    """The white space before each capitalised word that may start a sentence whose predecessor lacks its full
    stop: one that follows a word in small letters ("in a city The man"). Never at a name: not inside or before a
    run of capitalised words ("a Boston Terrier", "in New York"), nor before "I" or a word in capitals ("NASA",
    "TV"), which stand mid-sentence."""
    words = sentence.split()
    capital = [_capitalised(word) for word in words] + [False]
    spaces = [m for m in _SPACE.finditer(sentence) if 0 < m.start() and m.end() < len(sentence)]
    return [  # the k-th space stands before words[k + 1]
        m
        for k, m in enumerate(spaces)
        if words[k][-1].islower() and not words[k][0].isupper() and capital[k + 1] and not capital[k + 2]
    ]


def _capitalised(word: str) -> bool:
    """A word that begins with a capital and goes on in small letters ("The", "A"; not "I", "NASA", "iPhone")."""
    letters = [char for char in word if char.isalpha()]
    return word[0].isupper() and word != "I" and (len(letters) == 1 or any(char.islower() for char in letters))


def _character_halves(sentence: str) -> tuple[str, str, str]:
    at = len(sentence) // 2
    while 1 < at and unicodedata.combining(sentence[at]):  # an accent stays with its letter
        at -= 1
    return sentence[:at], "", sentence[at:]


def cut_segmented(segmented: Segmented, count: Count, limit: int) -> Segmented:
    """Every source over `limit` tokens cut into pieces that fit (see cut_long)."""
    sizes = count(segmented.sources) if segmented.sources else []
    sources, gaps = [], []
    for source, gap, size in zip(segmented.sources, segmented.gaps, sizes):
        pieces, inner = cut_long(source, count, limit) if size > limit else ([source], [""])
        sources += pieces
        gaps += inner[:-1] + [gap]
    return Segmented(segmented.lead, sources, gaps)


def split_lines(text: str) -> Segmented:
    """`text` cut at line breaks only ("\\r\\n", "\\r", "\\n"): each line one source, as `mtkit translate` reads."""
    sources, gaps = [], []
    lead = ""
    for line in _LINE.findall(text):
        body = line.rstrip("\r\n")
        column = option_column(body)
        core = body[column:].strip()
        if not core:
            if gaps:
                gaps[-1] += line
            else:
                lead += line
            continue
        start = body.index(core, column)
        if gaps:
            gaps[-1] += body[:start]
        else:
            lead += body[:start]
        sources.append(core)
        gaps.append(body[start + len(core) :] + line[len(body) :])
    return Segmented(lead, sources, gaps)


def option_column(line: str) -> int:
    """The length of `line`'s command-line option column and the white space after it (0 for a line without)."""
    found = _OPTION_COLUMN.match(line)
    return found.end() if found else 0


def option_columns(text: str) -> list[range]:
    """Where in `text` its lines' option columns stand (the characters split_sentences keeps as written)."""
    columns, at = [], 0
    for line in _LINE.findall(text):
        if column := option_column(line):
            columns.append(range(at, at + column))
        at += len(line)
    return columns


def wordy(text: str) -> bool:
    """Letters or digits: something a model can translate (emoji and punctuation alone are kept as written)."""
    return any(char.isalnum() for char in text)
