"""The line path: a line translated whole, without the guard (`mtkit translate --no-guard`, n-best and prefixes,
the bulk jobs' lines): its protected spans and glossary terms as mtkit.text.sentence_plan prepares a sentence's, sent
in sentence case, each output given the line's case and spans back; the lines whose best output lacks a glossary
term go again by the next method. Sentences and the guard are mtkit.text.sentence_plan's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mtkit.text.casing import case_of, normalised, restored
from mtkit.text.protect import Masked
from mtkit.text.sentence_plan import Prepared, SplitOptions, prepare
from mtkit.text.sentences import wordy


@dataclass(frozen=True)
class Line:
    """One line of the line path (one segment a line, n-best and prefixes allowed): what the model gets (`asked`;
    "" for a line copied whole) and how its outputs come back."""

    source: str
    prepared: Prepared
    case: str

    @property
    def asked(self) -> str:
        return "" if self.prepared.whole else normalised(self.prepared.masked.text, self.case)

    def finish(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        """An output of the model for this line, with the source's case and spans back."""
        if self.prepared.whole:
            return self.source, []
        return self.prepared.finish(restored(text, self.case), self.case)

    @property
    def method(self) -> str:
        return self.prepared.method

    @property
    def targets(self) -> tuple[str, ...]:
        """The glossary targets the search is to place in this line's translation (its "guided" terms)."""
        return () if self.prepared.whole else self.prepared.targets

    def fallback(self, text: str) -> Line | None:
        """The line by its next method where `text` (the model's best output for it) lacks a glossary term and a
        method is left; else None."""
        if self.prepared.whole or not self.prepared.found:
            return None
        later = self.prepared.fallback(restored(text, self.case), self.case)
        return None if later is None else Line(self.source, later, self.case)


def line_terms(lines: Iterable[Line] | None) -> list[tuple[str, ...]] | None:
    """Each line's targets for the search to place (one tuple a line), or None where no line has any."""
    terms = [] if lines is None else [line.targets for line in lines]
    return terms if any(terms) else None


def retried_lines(lines: list[Line], texts: list[str]) -> dict[int, Line]:
    """The lines (by index) whose best output `texts` lacks a glossary term, each by its next method: the caller
    translates their `asked` again and calls this again with the new outputs, until it returns none."""
    return {i: line for i, (old, text) in enumerate(zip(lines, texts, strict=True)) if (line := old.fallback(text))}


def prepare_line(line: str, options: SplitOptions, case: bool = True) -> Line:
    """A line as the plain path sends it: spans as stand-ins, then (with `case` and options.case) in sentence
    case; a line without words or spans goes as it is."""
    if not wordy(line):
        return Line(line, Prepared(Masked(line, line)), "")
    prepared = prepare(line.strip(), options)
    if prepared.whole:
        return Line(line, prepared, "")
    return Line(line, prepared, case_of(prepared.masked.text) if options.case and case else "")
