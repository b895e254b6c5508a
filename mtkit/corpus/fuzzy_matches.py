"""Neural fuzzy repair's training data (Bulté & Tezcan 2019; Xu, Crego & Senellart 2020; eole's fuzzymatch
transform): a corpus whose pairs each carry the target of their best fuzzy match among the corpus's other pairs,
after one reserved piece, `source ｟fuzzy｠ match target`. A model trained on such pairs beside the plain ones learns
to take what a match's target gets right and repair the rest; at translation time a translation memory's best fuzzy
match reaches it the same way (mtkit.text.sentence_plan, SplitOptions.fuzzy_piece). A run preprocessed with such a
corpus has FUZZY_PIECE in its vocabulary, and that is how the engines know the model takes matches (fuzzy_piece).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from mtkit.corpus.sources import Chunks, Source
from mtkit.errors import check

if TYPE_CHECKING:
    from mtkit.tokenizer import TableTokenizer, Tokenizer

# eole's fuzzymatch transform's token: one reserved piece, never in real text.
FUZZY_PIECE = "｟fuzzy｠"
# (pairs, threshold) -> the pairs that have a match, each source given its match's target.
Matcher = Callable[[list[tuple[str, str]], int], list[tuple[str, str]]]


def with_match(source: str, match_target: str) -> str:
    """A source as a fuzzy-repair model reads it: the sentence, the piece, the match's target."""
    return f"{source} {FUZZY_PIECE} {match_target}"


def fuzzy_piece(tokenizer: Tokenizer | TableTokenizer) -> str:
    """FUZZY_PIECE where the model has it as a source piece (a run preprocessed with a fuzzy-match corpus); ""
    otherwise (every other run, imported vocabularies)."""
    return FUZZY_PIECE if FUZZY_PIECE in set(tokenizer.pieces()) else ""


def fuzzy_source(source: Source, threshold: int, chunk_pairs: int, matcher: Matcher | None) -> Source:
    """`source`'s pairs whose source has a fuzzy match scoring `threshold` to 99 among the corpus's other sources,
    each source given that match's target (with_match); the pairs without one are left out. Read and matched once,
    here (the split's count must be known before anything is written), by `matcher`: the translation memory's index
    (mtkit.memory.fuzzy_repair.matched_pairs), which the command line hands down, since corpus/ stands below memory/."""
    check(
        matcher is not None,
        f"{source.name}: fuzzy_matches needs the translation memory's index: preprocess with `mtkit preprocess`",
    )
    pairs = [pair for sources, targets in source.chunks() for pair in zip(sources, targets)]
    matched = matcher(pairs, threshold)
    return Source(source.name, functools.partial(_listed_chunks, matched, chunk_pairs), len(matched), source.clean)


def _listed_chunks(pairs: list[tuple[str, str]], chunk_pairs: int, start: int = 0, end: int | None = None) -> Chunks:
    """Pairs [start, end) of a list, chunk_pairs at a time, as a file source gives them."""
    rest = iter(pairs[start:end])
    while chunk := list(itertools.islice(rest, chunk_pairs)):
        sources, targets = zip(*chunk)
        yield list(sources), list(targets)
