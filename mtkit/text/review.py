"""Whether a machine translation stands or a translation memory's fuzzy match is offered in its place, for a
translator to review: as msgmerge fills a changed entry with its old translation, flagged fuzzy, the match's target
is offered wherever the model's output is no light edit of it (chrF under EDITED against it). On held-out software
catalogs (2026-12-02) the match's target copied scored above the model's rewrite of it; an output close to the
target is the model's edit of it, and kept.
"""

from __future__ import annotations

EDITED = 80.0  # chrF of the model's output against the match's target from which the output counts as its edit


def offered(output: str, target: str) -> str:
    """The model's `output`, or the match's `target` where the output departs from it."""
    from sacrebleu.metrics import CHRF  # a dependency of mtkit's own, read only where a memory fills for review

    return output if CHRF().sentence_score(output, [target]).score >= EDITED else target
