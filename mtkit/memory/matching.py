"""A translation memory's index: a segment's source normalised (white space, protected spans), exact lookup by a
hash of that key, fuzzy candidates narrowed by a word index to a few hundred and scored by rapidfuzz, and an exact
match's target given the new sentence's protected spans (placeholders, numbers, URLs: mtkit.text.protect).
Fuzzy score: rapidfuzz.fuzz.ratio (the normalised Indel similarity over characters) of the normalised sources,
floored to a whole percentage, as CAT tools show it; 100 only for an exact match. No IO, no store.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from mtkit.text.protect import ProtectConfig

DEFAULT_THRESHOLD = 75  # the fuzzy score CAT tools (Trados, memoQ) show matches from by default
CANDIDATES = 300  # sources rapidfuzz scores per lookup, the ones sharing most of the query's rarer words
RARE_WORDS = 8  # the query's rarest words whose postings are counted
MAX_POSTINGS = 50_000  # a word in more sources than this (the, a, is) narrows nothing: skipped when rarer ones exist
SPAN = "\ufffc"  # what a protected span is in a key: any placeholder, number or URL matches any other
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")
# What mtkit.text.protect keeps as written, and plain numbers too: a CAT tool's placeables, which differ between
# two sentences an exact match still takes ("3 files" and "12 files").
_PROTECT = ProtectConfig(patterns=(r"\b\d+(?:[.,]\d+)*\b",))


@dataclass(frozen=True)
class Match:
    """The memory's best segment for a sentence: its score (100: exact), its source and target as stored, and the
    target to use (an exact match's target with the sentence's own protected spans; the stored one otherwise)."""

    score: int
    source: str
    target: str
    segment: int  # the segment's position in its memory
    translation: str = ""

    def report(self) -> dict[str, object]:
        """A sentence report's "memory": {"score", "source", "target"}."""
        return {"score": self.score, "source": self.source, "target": self.target}


def normalised(text: str) -> str:
    """White space collapsed to one space and stripped: the text an exact match compares."""
    return _SPACE.sub(" ", text).strip()


def spans_of(text: str) -> tuple[str, list[str]]:
    """The normalised text with each protected span as SPAN, and the spans' texts in order."""
    text = normalised(text)
    places = _PROTECT.spans(text)
    pieces, at = [], 0
    for low, high in places:
        pieces += [text[at:low], SPAN]
        at = high
    return "".join(pieces) + text[at:], [text[low:high] for low, high in places]


def key_of(text: str) -> int:
    """The exact lookup's key: 8 bytes of BLAKE2b of the normalised source with its spans as SPAN."""
    skeleton = spans_of(text)[0]
    return int.from_bytes(hashlib.blake2b(skeleton.encode("utf-8"), digest_size=8).digest(), "little")


def words_of(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def carried(target: str, old: list[str], new: list[str]) -> str:
    """A stored target with the stored source's protected spans (`old`) replaced by the new sentence's (`new`), one
    by one in the target's order of them; a span the target lacks stays as the target writes it."""
    if old == new:
        return target
    pending = list(zip(old, new))
    pieces, at = [], 0
    while pending:
        found = [(target.find(o, at), k) for k, (o, _) in enumerate(pending) if o and target.find(o, at) >= 0]
        if not found:
            break
        place, k = min(found)
        o, n = pending.pop(k)
        pieces += [target[at:place], n]
        at = place + len(o)
    return "".join(pieces) + target[at:]


class MemoryIndex:
    """A memory's segments, (source, target) in order, indexed for exact and fuzzy lookup; `memory_id` names the
    memory they came from, for a caller that marks them used."""

    def __init__(self, pairs: Iterable[tuple[str, str]], memory_id: str = "") -> None:
        self.memory_id = memory_id
        self.sources: list[str] = []
        self.targets: list[str] = []
        self.exact: dict[int, int] = {}
        vocabulary: dict[str, int] = {}
        word_ids: list[int] = []
        segment_ids: list[int] = []
        for source, target in pairs:
            position = len(self.sources)
            self.sources.append(normalised(source))
            self.targets.append(target)
            self.exact.setdefault(key_of(source), position)  # the first of duplicates, as the file ordered them
            for word in words_of(source):
                word_ids.append(vocabulary.setdefault(word, len(vocabulary)))
                segment_ids.append(position)
        self.vocabulary = vocabulary
        # The word index as one CSR array: postings[starts[w]:starts[w + 1]] are the sources holding word w.
        order = np.argsort(np.asarray(word_ids, dtype=np.int64), kind="stable")
        self.postings = np.asarray(segment_ids, dtype=np.int32)[order]
        counts = np.bincount(np.asarray(word_ids, dtype=np.int64), minlength=len(vocabulary))
        self.starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.lengths = np.fromiter((len(s) for s in self.sources), dtype=np.int32, count=len(self.sources))

    def __len__(self) -> int:
        return len(self.sources)

    def exact_match(self, sentence: str) -> Match | None:
        """The segment whose normalised source, spans aside, is the sentence's; its target given the sentence's
        spans. A hash collision is caught by comparing the keys' texts."""
        position = self.exact.get(key_of(sentence))
        if position is None:
            return None
        skeleton, new = spans_of(sentence)
        stored, old = spans_of(self.sources[position])
        if stored != skeleton:
            return None
        target = self.targets[position]
        return Match(100, self.sources[position], target, position, carried(target, old, new))

    def candidates(self, sentence: str, threshold: int) -> np.ndarray:
        """The positions of at most CANDIDATES sources sharing most of the sentence's rarer words, within the
        lengths a ratio at `threshold` allows (ratio <= 2 * min(len) / (len a + len b))."""
        ids = [self.vocabulary[w] for w in words_of(sentence) if w in self.vocabulary]
        if not ids:
            return np.empty(0, dtype=np.int32)
        sizes = sorted((int(self.starts[i + 1] - self.starts[i]), i) for i in ids)
        chosen = [i for size, i in sizes[:RARE_WORDS] if size <= MAX_POSTINGS] or [sizes[0][1]]
        found = np.concatenate([self.postings[self.starts[i] : self.starts[i + 1]] for i in chosen])
        if len(chosen) == 1:
            found = found[:MAX_POSTINGS]
        length = len(normalised(sentence))
        share = threshold / 200
        low, high = length * share / (1 - share), length * (1 - share) / share if share else np.inf
        found = found[(self.lengths[found] >= low) & (self.lengths[found] <= high)]
        positions, counts = np.unique(found, return_counts=True)
        if len(positions) <= CANDIDATES:
            return positions
        return positions[np.argpartition(-counts, CANDIDATES)[:CANDIDATES]]

    def best(self, sentence: str, threshold: int = DEFAULT_THRESHOLD) -> Match | None:
        """The exact match, else the best fuzzy one scoring at least `threshold` (the earliest of equals)."""
        exact = self.exact_match(sentence)
        if exact is not None:
            return exact
        from rapidfuzz import fuzz  # the serve extra's; a memory is only indexed where it is installed

        query = normalised(sentence)
        best: Match | None = None
        for position in sorted(int(p) for p in self.candidates(sentence, threshold)):
            score = int(fuzz.ratio(query, self.sources[position]))
            if score >= threshold and score < 100 and (best is None or score > best.score):
                best = Match(score, self.sources[position], self.targets[position], position)
        return best
