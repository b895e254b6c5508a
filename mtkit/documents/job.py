"""What every document format gives the translator, and how a document comes back: a Job holds the sentences to
translate (each taken whole: a format cuts its own text into sentences, through mtkit.text) and the function that
builds the translated document from their translations. Formats, the CLI and the server meet here; no format
knows a model, so the sentences of many documents go through the engine in the same batches."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from mtkit.errors import UserError
from mtkit.text.review import offered

Translate = Callable[[list[str]], list[str]]  # sentences -> their translations, in order, one each
Answer = Callable[[list[str]], dict[str, str]]  # units -> those a translation memory holds whole, translated
# Units -> those a memory's fuzzy match answers for review (repaired, patched), and the match targets it offers for
# the others (Job.patched, Job.offered).
Review = Callable[[list[str]], tuple[dict[str, str], dict[str, str]]]


class DocumentError(UserError):
    """A document mtkit will not translate (unknown, mislabelled, corrupt, encrypted, too large, hostile): the
    message names the file and the reason, in one line; a server answers it with a 4xx."""


@dataclass
class Job:
    """One document's sentences out and the document back: `finish(translations)` of `texts` in order gives the
    translated document's bytes. `counts` says what a format did (paragraphs, cues, tags placed, ...), for logs.
    `exact`: its texts a translation memory answered whole (a 100% match), set before `finish`; a format that marks
    machine translations for review (a PO entry's fuzzy flag, an XLIFF 1.2 target's state) leaves those unmarked.
    `units`: a catalog's whole strings (msgids, segments), as a translator's memory holds them; `answered`, set
    before `finish`, those a memory holds whole, with its translation, which the format writes as it is, unmarked:
    a CAT tool matches the unit, not its sentences, whose spacing and options a help text splits apart. `patched`
    and `offered`, set before `finish` where the entries go to review: what a fuzzy match of the whole unit gives
    it (for_review), written flagged as any machine translation."""

    texts: list[str]
    finish: Callable[[list[str]], bytes]
    counts: dict[str, int] = field(default_factory=dict)
    exact: set[str] = field(default_factory=set)
    units: list[str] = field(default_factory=list)
    answered: dict[str, str] = field(default_factory=dict)
    patched: dict[str, str] = field(default_factory=dict)
    offered: dict[str, str] = field(default_factory=dict)

    def for_review(self, unit: str, translation: str, placeholders: re.Pattern[str]) -> str | None:
        """A unit's translation where a memory's fuzzy match has a part in it (the format flags it for review): the
        match repaired or patched (`patched`), else the model's `translation` unless it departs from the match's
        target (`offered`, mtkit.text.review); None where no fuzzy match does, or where the match would not hold
        the unit's own `placeholders` (the format's pattern of them)."""
        wanted = Counter(placeholders.findall(unit))
        found = self.patched.get(unit) or self.offered.get(unit)
        if found is None or Counter(placeholders.findall(found)) != wanted:
            return None
        return found if unit in self.patched else offered(translation, found)


def run_jobs(
    jobs: list[Job],
    translate: Translate,
    exact: Collection[str] = (),
    answer: Answer | None = None,
    review: Review | None = None,
) -> list[bytes]:
    """Every job's sentences translated in one call (each distinct sentence once), then each document built.
    `exact`: the sentences a translation memory answered whole, as `translate` finds them (a set it fills).
    `answer`: the units a translation memory holds whole, with their translations (Job.answered); `review`: what
    its fuzzy matches give the others (Job.patched, Job.offered), all documents' units in one call."""
    for job in jobs:
        job.answered = answer(job.units) if answer is not None and job.units else {}
    if review is not None:
        units = list(dict.fromkeys(unit for job in jobs for unit in job.units if unit not in job.answered))
        patched, offers = review(units) if units else ({}, {})
        for job in jobs:
            job.patched = {unit: patched[unit] for unit in job.units if unit in patched}
            job.offered = {unit: offers[unit] for unit in job.units if unit in offers}
    wanted = list(dict.fromkeys(text for job in jobs for text in job.texts))
    found = dict(zip(wanted, translate(wanted) if wanted else []))
    for job in jobs:
        job.exact = {text for text in job.texts if text in exact}
    return [job.finish([found[text] for text in job.texts]) for job in jobs]
