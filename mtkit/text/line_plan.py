"""The line plan: a line translated whole, one segment a line (`mtkit translate --no-guard`, n-best and forced
prefixes, the bulk jobs' lines), sans-I/O like the sentence plan. `prepare_line` puts a line's protected spans and
glossary terms as stand-ins and its case in sentence case; `plan_lines`, a generator, yields the lines the model is to
translate (mtkit.text.sentence_plan.Asked, with their rows and the targets the search is to place), is sent their
Outputs, sends the lines whose best output lacks a glossary term again by the next method, and returns each line as
last asked, whose `finish` gives an output its case and spans back. The sentence plan's drivers (`run_plan`,
`run_plan_async`) drive it too. `guarded` is the one rule for which plan a line takes.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from mtkit.text.casing import case_of, normalised, restored
from mtkit.text.protect import Masked
from mtkit.text.sentence_plan import Asked, Output, Prepared, SplitOptions, prepare
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

    def aligned(self, output: Output) -> Line:
        """The line with its "replace" terms' targets in place of the words of the model's best output (`output`,
        with its word alignment) they are aligned to, which `finish` then gives; as it was where nothing changes."""
        if not self.prepared.aligns or output.alignment is None:
            return self
        later = self.prepared.aligned(restored(output.text, self.case), output.alignment, self.case)
        return self if later is self.prepared else Line(self.source, later, self.case)

    def fallback(self, text: str) -> Line | None:
        """The line by its next method where `text` (the model's best output for it) lacks a glossary term and a
        method is left; else None."""
        if self.prepared.whole or not self.prepared.found:
            return None
        later = self.prepared.fallback(restored(text, self.case), self.case)
        return None if later is None else Line(self.source, later, self.case)


def prepare_line(line: str, options: SplitOptions, case: bool = True) -> Line:
    """A line as the plain path sends it: spans as stand-ins, then (with `case` and options.case) in sentence
    case; a line without words or spans goes as it is."""
    if not wordy(line):
        return Line(line, Prepared(Masked(line, line)), "")
    prepared = prepare(line.strip(), options)
    if prepared.whole:
        return Line(line, prepared, "")
    return Line(line, prepared, case_of(prepared.masked.text) if options.case and case else "")


def plan_lines(lines: list[Line]) -> Generator[Asked, list[Output], list[Line]]:
    """Yields the lines to translate (each Line's `asked`, their rows among `lines` and their targets), as
    prepare_line made them, and is sent their Outputs, in order; a line whose "replace" terms are asked with its
    word alignment gets their targets in place of their aligned words; a line whose best output lacks a glossary term
    is yielded again by its next method until it holds its terms or has none left. Returns every line as last
    asked."""
    lines = list(lines)
    rows = list(range(len(lines)))
    while rows:
        align = [lines[i].prepared.replacing if lines[i].prepared.aligns else () for i in rows]
        outputs = yield Asked([lines[i].asked for i in rows], [lines[i].targets for i in rows], rows, align)
        again = []
        for i, output in zip(rows, outputs, strict=True):
            lines[i] = lines[i].aligned(output)
            if later := lines[i].fallback(output.text):
                lines[i] = later
                again.append(i)
        rows = again
    return lines


def guarded(split: bool, guard: bool, nbest: int, prefixes: bool) -> bool:
    """Whether texts go by the sentence plan, guarded (split into sentences, or each line's best alone, one segment
    a line, as `mtkit translate` and `mtkit serve` both answer it), rather than by the line plan: n-best rows,
    forced prefixes and `--no-guard` are whole lines, unguarded."""
    return split or (guard and nbest == 1 and not prefixes)
