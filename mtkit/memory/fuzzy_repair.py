"""Neural fuzzy repair's training pairs (mtkit.corpus.fuzzy_matches): each pair's best fuzzy match among a corpus's
other pairs, found by the translation memory's index as `mtkit translate --memory` finds a sentence's, so a model
learns from the matches it will be given. The matcher `mtkit preprocess` hands to the corpus plan.
"""

from __future__ import annotations

from mtkit.console import progress
from mtkit.corpus.fuzzy_matches import with_match
from mtkit.memory.matching import MemoryIndex


def matched_pairs(pairs: list[tuple[str, str]], threshold: int) -> list[tuple[str, str]]:
    """The pairs whose source has a match scoring `threshold` to 99 among the others (an identical source is no
    match: it teaches nothing a plain pair does not), each source followed by that match's target."""
    index = MemoryIndex(pairs)
    matched = []
    with progress() as bar:
        task = bar.add_task("fuzzy matches", total=len(pairs), info="")
        for text, target in pairs:
            match = index.fuzzy_match(text, threshold)
            if match is not None:
                matched.append((with_match(text, match.target), target))
            bar.advance(task)
    return matched
