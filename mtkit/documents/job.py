"""What every document format gives the translator, and how a document comes back: a Job holds the sentences to
translate (each taken whole: a format cuts its own text into sentences, through mtkit.text) and the function that
builds the translated document from their translations. Formats, the CLI and the server meet here; no format
knows a model, so the sentences of many documents go through the engine in the same batches."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from mtkit.errors import UserError

Translate = Callable[[list[str]], list[str]]  # sentences -> their translations, in order, one each
Answer = Callable[[list[str]], dict[str, str]]  # units -> those a translation memory holds whole, translated


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
    a CAT tool matches the unit, not its sentences, whose spacing and options a help text splits apart."""

    texts: list[str]
    finish: Callable[[list[str]], bytes]
    counts: dict[str, int] = field(default_factory=dict)
    exact: set[str] = field(default_factory=set)
    units: list[str] = field(default_factory=list)
    answered: dict[str, str] = field(default_factory=dict)


def run_jobs(
    jobs: list[Job], translate: Translate, exact: Collection[str] = (), answer: Answer | None = None
) -> list[bytes]:
    """Every job's sentences translated in one call (each distinct sentence once), then each document built.
    `exact`: the sentences a translation memory answered whole, as `translate` finds them (a set it fills).
    `answer`: the units a translation memory holds whole, with their translations (Job.answered)."""
    for job in jobs:
        job.answered = answer(job.units) if answer is not None and job.units else {}
    wanted = list(dict.fromkeys(text for job in jobs for text in job.texts))
    found = dict(zip(wanted, translate(wanted) if wanted else []))
    for job in jobs:
        job.exact = {text for text in job.texts if text in exact}
    return [job.finish([found[text] for text in job.texts]) for job in jobs]
