"""Text that is not language, kept out of the model: placeholders, URLs, e-mail addresses, inline code, file paths,
TeX math, numbers and numeric dates are found in a sentence (ProtectConfig: the defaults and a user's own
patterns), each replaced by a stand-in the model carries through, and put back after translation byte for byte and
exactly once, whatever the model did with its stand-in. Glossary terms (mtkit.text.glossary) ride on the same
stand-ins with their target as the text put back. Pure functions of strings; `errors` only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from mtkit.errors import UserError, check

# Each default pattern is one kind of span; the first to match at a place wins, so longer kinds come first.
_UNITS = r"(?:%|‰|°[CF]?|km/h|[kMGT]?B|[kMG]?Hz|[kcm]?m|kg|mg|ml|px|pt)(?![\w/])"  # after a number, kept with it
_TRAIL = r"(?<![.,;:!?'\")\]}>])"  # a URL or path does not end in the sentence's punctuation
DEFAULT_PATTERNS: dict[str, str] = {
    "code": r"```[^`]+```|`[^`\n]+`",
    "math": r"\\\(.+?\\\)|\\\[.+?\\\]|\$\$.+?\$\$",
    "url": r"(?:[a-zA-Z][a-zA-Z0-9+.-]*://|www\.|mailto:)[^\s<>\"]+" + _TRAIL,
    "email": r"[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[a-zA-Z]{2,}",
    "placeholder": r"\{\{[^{}\n]*\}\}|\{[\w.:!\[\]-]*\}|\$\{\w+\}(?:/[\w.@+-]+)*"
    r"|%\(\w+\)[-+ #0]*\d*(?:\.\d+)?[sdifeEgGxXocr]|%\d+\$[-+ #0]*\d*(?:\.\d+)?[sdifeEgGxXoc]"
    r"|%[-+#0]*\d*(?:\.\d+)?[sdifeEgGxXoc@](?![\w])|\$[A-Za-z_]\w*(?:/[\w.@+-]+)*/?",
    "path": r"(?<![\w/])(?:~|\.{1,2})?(?:/[\w.@+-]+){2,}/?" + _TRAIL + r"|\b[A-Za-z]:\\[\w\\.-]+"
    r"|\b[\w-]+(?:/[\w-]+)*/[\w-]+\.[a-zA-Z0-9]{1,5}\b",
    "date": r"(?<![\w.,])\d{1,4}[-./]\d{1,2}[-./]\d{1,4}(?![\w])|(?<![\w.,:])\d{1,2}:\d{2}(?::\d{2})?(?![\w:])",
    # A reference or footnote marker ([1], [12], [a], (3)): the model reads it as noise and drops it. "(a)" is left
    # out, since it may be a word.
    "marker": r"\[(?:\d{1,3}|[a-z])\](?!\()|(?<![\w(])\(\d{1,3}\)(?![\w)])",
    # A number that is not a plain count: separators, decimals, a sign, a percentage or a unit. A plain count
    # inside a sentence ("2 men") is language the model translates; one standing alone is copied (copy_whole).
    "number": r"(?<![\w.,])(?:[+\-−±]\d[\d,.  ]*\d|[+\-−±]\d"
    r"|[+\-−±]?\d{1,3}(?:[,.  ]\d{3})+(?:[.,]\d+)?|[+\-−±]?\d+[.,]\d+)"
    rf"(?:\s?{_UNITS})?(?![\w])|(?<![\w.,])\d+\s?{_UNITS}",
    # A year in text (1500-2099: "January 2004", not "1990s" nor "2004.5"), after the numbers so that "2004 km" is
    # one: a small model rewrites a long number it has seldom seen ("2004" -> "10 110").
    "year": r"(?<![\w.,])(?:1[5-9]\d\d|20\d\d)(?![\w]|[.,]\d)",
}
_PLAIN_NUMBER = re.compile(r"[+\-−±]?\d+(?:[.,  ]\d+)*")
_ALL = re.compile("|".join(f"(?:{pattern})" for pattern in DEFAULT_PATTERNS.values()))


@dataclass(frozen=True)
class ProtectConfig:
    """What is kept as written: the built-in kinds (`default`) and the user's own `patterns` (Python regular
    expressions; a match is kept whole)."""

    default: bool = True
    patterns: tuple[str, ...] = ()
    compiled: tuple[re.Pattern[str], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        compiled = []
        for pattern in self.patterns:
            check(
                isinstance(pattern, str) and pattern != "",
                f"protect: a pattern must be a non-empty string; got {pattern!r}",
            )
            try:
                compiled.append(re.compile(pattern))
            except re.error as exc:
                raise UserError(f"protect: bad regular expression {pattern!r}: {exc}") from None
        object.__setattr__(self, "compiled", tuple(compiled))

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The (start, end) of each protected span, left to right, none overlapping; the user's patterns first,
        then the defaults, an earlier or longer span winning an overlap."""
        found: list[tuple[int, int]] = []
        for pattern in self.compiled + ((_ALL,) if self.default else ()):
            found += [(m.start(), m.end()) for m in pattern.finditer(text) if m.end() > m.start()]
        return _disjoint(found)


def _disjoint(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans without overlaps: taken in the order found, one overlapping an earlier one dropped."""
    taken: list[tuple[int, int]] = []
    for low, high in spans:
        if all(high <= a or low >= b for a, b in taken):
            taken.append((low, high))
    return sorted(taken)


def copied_whole(text: str, cfg: ProtectConfig) -> bool:
    """Whether a segment is nothing but protected spans, numbers, punctuation and space: copied, never sent."""
    if not cfg.default and not cfg.compiled:
        return False
    rest = text
    for low, high in reversed(cfg.spans(text)):
        rest = rest[:low] + " " + rest[high:]
    if cfg.default:
        rest = _PLAIN_NUMBER.sub(" ", rest)
    return rest != text and not any(char.isalpha() for char in rest)


@dataclass(frozen=True)
class Span:
    """A piece of the source the model never sees: `source` as written, `target` what goes back in its place (the
    same for protected text, the target term for a glossary's), `term` True for a glossary's."""

    source: str
    target: str
    term: bool = False
    inline: bool = False  # a term whose target itself goes to the model in its place (no stand-in, nothing put back)


@dataclass(frozen=True)
class Masked:
    """A sentence as the model gets it: each span replaced by its stand-in (`standins[i]` for `spans[i]`; an inline
    term's stand-in is its target)."""

    source: str
    text: str
    spans: tuple[Span, ...] = ()
    standins: tuple[str, ...] = ()
    shares: tuple[float, ...] = ()  # where each span stands: the share of the sentence's other words before it


# Stand-ins are small numbers: of the kinds measured (docs/terminology.md) they disturbed the translation of the
# rest of the sentence least. The restore does not rely on the model carrying them, and leaves none of their
# digits: a run of digits the source does not hold that is made of stand-ins ("21" for 2 and 1 side by side) is
# the model's copy of them, taken out.
_STANDIN_BASE = 1


def _standins(text: str, count: int) -> list[str]:
    """`count` numbers from _STANDIN_BASE up that are no number of `text`, nor inside one."""
    used = set(re.findall(r"\d+", text))
    out, n = [], _STANDIN_BASE
    while len(out) < count:
        if str(n) not in used and not any(str(n) in u for u in used):
            out.append(str(n))
        n += 1
    return out


def mask(source: str, places: list[tuple[int, int, Span]]) -> Masked:
    """`source` with each (start, end, span) of `places` (disjoint) replaced by a stand-in; spans next to each other
    with nothing between them are one span, so that two stand-ins never touch."""
    places = _merged(sorted(places, key=lambda place: place[0]), source)
    if not places:
        return Masked(source, source)
    numbers = iter(_standins(source, sum(not span.inline for _, _, span in places)))
    standins = [span.target if span.inline else next(numbers) for _, _, span in places]
    pieces, at, before_words = [], 0, []
    for (low, high, _), standin in zip(places, standins):
        before = source[at:low]
        # a stand-in glued to a letter or digit would be read as part of that word
        pad_left = " " if before and before[-1].isalnum() else ""
        pad_right = " " if high < len(source) and source[high].isalnum() else ""
        pieces += [before, pad_left, standin, pad_right]
        before_words.append(len(" ".join(pieces[::4]).split()))  # the words before it, stand-ins not counted
        at = high
    pieces.append(source[at:])
    words = max(len(" ".join(pieces[::4]).split()), 1)
    shares = tuple(count / words for count in before_words)
    return Masked(source, "".join(pieces), tuple(span for _, _, span in places), tuple(standins), shares)


def _merged(places: list[tuple[int, int, Span]], source: str) -> list[tuple[int, int, Span]]:
    out: list[tuple[int, int, Span]] = []
    for low, high, span in places:
        if out and out[-1][1] == low and not out[-1][2].term and not span.term:
            prev = out.pop()
            out.append((prev[0], high, Span(source[prev[0] : high], source[prev[0] : high])))
        else:
            out.append((low, high, span))
    return out


def protected_places(source: str, cfg: ProtectConfig) -> list[tuple[int, int, Span]]:
    """Each protected span of `source` as a place for mask()."""
    return [(low, high, Span(source[low:high], source[low:high])) for low, high in cfg.spans(source)]


def masked_like(text: str, masked: Masked, cfg: ProtectConfig) -> str:
    """`text` (a fuzzy match's target, which the model reads after the sentence) with each of the sentence's
    protected spans as the sentence's stand-in for it and every other protected span taken out: the model is to
    copy the sentence's stand-ins, and a placeholder of the match's written beside them would stand twice."""
    for span, standin in zip(masked.spans, masked.standins):
        if not span.term and span.source in text:
            text = text.replace(span.source, standin)
    for low, high in reversed(cfg.spans(text)):
        text = text[:low] + text[high:]
    return " ".join(text.split())


@dataclass
class Unmasked:
    """A translation with every span put back, and per span whether its stand-in came back exactly once."""

    text: str
    carried: list[bool]


def unmask(translation: str, masked: Masked, styled: Callable[[str], str] = str) -> Unmasked:
    """The translation with each span's target in place of its stand-in, exactly once: a stand-in found more than
    once keeps the occurrence nearest its source position, one found only inside a run of stand-ins' digits ("21")
    goes there, one not found has its text inserted at the word of the translation at the same share as in the
    source. Every other run of stand-ins' digits the source does not hold is taken out. A term's target is `styled`
    (the sentence's casing); an inline term is the model's to write and is left as it is."""
    if not masked.spans:
        return Unmasked(translation, [])
    words = [m.start() for m in re.finditer(r"\S+", translation)]
    numbers = [s for span, s in zip(masked.spans, masked.standins) if not span.inline]
    glued = _glued(translation, numbers, set(re.findall(r"\d+", masked.source)))
    edits: list[tuple[int, int, str]] = []
    carried = []
    for i, (span, standin) in enumerate(zip(masked.spans, masked.standins)):
        if span.inline:
            carried.append(True)
            continue
        text = styled(span.target) if span.term else span.target
        # a stand-in glued to a word ("7th") is not the model's copy of it: that one counts as dropped
        found = list(re.finditer(rf"(?<![\w.,]){standin}(?!\w|[.,]\d)", translation))
        carried.append(len(found) == 1)
        if found:
            near = masked.shares[i] * len(translation)
            best = min(found, key=lambda m: abs(m.start() - near))
            edits += [(m.start(), m.end(), text if m is best else "") for m in found]
            continue
        inside = [run for run in glued if standin in glued[run]]
        if inside:
            glued[inside[0]][standin] = text
            continue
        k = round(masked.shares[i] * len(words))
        if k < len(words):
            edits.append((words[k], words[k], text + " "))
        else:
            edits.append((len(translation), len(translation), " " + text))
    edits += [(low, high, " ".join(t for t in parts.values() if t)) for (low, high), parts in glued.items()]
    out, at = [], 0
    for low, high, text in sorted(edits, key=lambda edit: (edit[0], edit[1])):
        piece = translation[at:low]
        if not text and piece.endswith(" ") and translation[high : high + 1] in (" ", ""):
            piece = piece[:-1]  # a duplicate removed with one space beside it
        if text[:1].strip() and "".join(out[-1:] + [piece])[-1:].isalnum():
            text = " " + text  # never glued to the word before ("1a2b": two runs of stand-ins side by side)
        out += [piece, text]
        at = high
    out.append(translation[at:])
    text = "".join(out)
    return Unmasked(text.lstrip() if not translation.strip() else text, carried)


def _glued(translation: str, standins: list[str], kept: set[str]) -> dict[tuple[int, int], dict[str, str]]:
    """Each run of digits of `translation` that is not a stand-in standing alone nor a number in `kept` (the
    source's) but is made of `standins` ("21", "1st"'s "1"): its (start, end), the letters glued to it included
    (the model's ending on a stand-in, "1222e"), and the stand-ins in it, in order, each mapped to "" (the text
    put there, if any, filled in by unmask)."""
    runs: dict[tuple[int, int], dict[str, str]] = {}
    previous = 0  # where the last run taken ended: runs never overlap
    for match in re.finditer(r"\d+", translation):
        run, low, high = match.group(), match.start(), match.end()
        alone = (low == 0 or not re.match(r"[\w.,]", translation[low - 1])) and not re.match(
            r"\w|[.,]\d", translation[high : high + 2]
        )
        if (alone and run in standins) or run in kept:
            continue
        parts = _split_into(run, standins) or _garbled(run, standins)
        if parts:
            while low > previous and translation[low - 1].isalpha():
                low -= 1
            while high < len(translation) and translation[high].isalpha():
                high += 1
            runs[(low, high)] = dict.fromkeys(parts, "")
            previous = high
    return runs


def _garbled(run: str, standins: list[str]) -> list[str]:
    """The stand-in a run of digits begins or ends with, as the model's garbled copy of it ("19" for 1, "10"), or
    none: a number the source does not hold that grew out of a stand-in is never the translation's."""
    for standin in sorted(standins, key=len, reverse=True):
        if run.startswith(standin) or run.endswith(standin):
            return [standin]
    return []


def _split_into(run: str, standins: list[str]) -> list[str] | None:
    """`run` as a sequence of `standins`, at each step the longest that leaves a rest made of them, or None. Each
    position's choice found once, from the end (backtracking took time exponential in a runaway's length: "1" and
    "11" split "111...19" in Fibonacci-many ways before failing)."""
    ordered = sorted(standins, key=len, reverse=True)
    choice: list[str | None] = [None] * len(run) + [""]  # choice[i]: the stand-in run[i:] begins with, if any
    for at in range(len(run) - 1, -1, -1):
        choice[at] = next((s for s in ordered if run.startswith(s, at) and choice[at + len(s)] is not None), None)
    parts, at = [], 0
    while at < len(run):
        taken = choice[at]
        if not taken:
            return None
        parts.append(taken)
        at += len(taken)
    return parts
