"""A translation memory's index: a segment's source normalised (white space, protected spans), exact lookup by a
hash of that key, fuzzy candidates narrowed by a term index (words and pairs of adjacent words, the rarest read
first within a bounded number of postings) to a few hundred and scored together by rapidfuzz, and an exact match's
target given the new sentence's protected spans (placeholders, numbers, URLs: mtkit.text.protect). Fuzzy score:
rapidfuzz.fuzz.ratio (the normalised Indel similarity over characters) of the normalised sources, floored to a whole
percentage, as CAT tools show it; 100 only for an exact match. The index is plain arrays (IndexArrays), built here
from pairs or mapped from disk by mtkit.memory.index_files, answering alike. No IO, no store.
"""

from __future__ import annotations

import hashlib
import mmap
import re
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import overload

import numpy as np

from mtkit.memory.fragments import fragments_of, may_cut
from mtkit.memory.patching import Difference, answer, asked, differences, patched
from mtkit.memory.repair import PRINTF, repaired
from mtkit.text.protect import DEFAULT_PATTERNS, ProtectConfig

DEFAULT_THRESHOLD = 75  # the fuzzy score CAT tools (Trados, memoQ) show matches from by default
CANDIDATES = 300  # sources rapidfuzz scores per lookup, the ones sharing most of the query's rarer terms
RARE_TERMS = 16  # the query's rarest terms (words, pairs of adjacent words) whose postings are counted
POSTINGS = 15_000  # the postings a lookup reads at most, rarest terms first: a common word (the, a) narrows nothing
SPAN = "\ufffc"  # what a protected span is in a key: any placeholder, number or URL matches any other
_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: a pair's key mixes both words' hashes (term_keys)
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")
# What mtkit.text.protect keeps as written, plain numbers and C's printf conversions with their length modifiers
# too (%u, %lu, %2lus): a CAT tool's placeables, which differ between two sentences an exact match still takes
# ("3 files" and "12 files").
_PROTECT = ProtectConfig(
    patterns=(
        r"\b\d+(?:[.,]\d+)*\b",
        PRINTF,
    )
)
# A character every protected kind needs (a digit, a placeholder's, a URL's, a path's, code's or math's): a text
# without one holds no span, and an import skips the patterns for it (most of a memory's segments).
_MAY_SPAN = re.compile(r"[\d`\\${}%@/\[:]|www\.")


@dataclass(frozen=True)
class Match:
    """The memory's best segment for a sentence: its score (100: exact), its source and target as stored, and the
    translation that answers the sentence, if any: an exact match's target with the sentence's own protected spans,
    a fuzzy one's with its placeables repaired (mtkit.memory.repair); "" where the match only informs."""

    score: int
    source: str
    target: str
    segment: int  # the segment's position in its memory
    translation: str = ""
    # Where the sentence differs from a fuzzy match's source in more than placeables, those parts to patch by the
    # model's translations (mtkit.memory.patching); None: nothing to patch.
    differences: tuple[Difference, ...] | None = None
    written: str = ""  # the target with the sentence's own spans carried in (those differences'), for a patch or fill
    # Where the match has another count of spans than the sentence: the sentence's, which a patch must give (the
    # target, with the match's own, is then patched or not used).
    spans: tuple[str, ...] | None = None

    def report(self) -> dict[str, object]:
        """A sentence report's "memory": {"score", "source", "target"}."""
        return {"score": self.score, "source": self.source, "target": self.target}

    def asks(self) -> list[str]:
        """The texts the model is to translate for the patch (none for a match with nothing to patch)."""
        return asked(self.differences) if self.differences else []

    def patched(self, translations: Mapping[str, Sequence[str]]) -> str | None:
        """The target (with the sentence's spans) patched by asks()'s `translations`; None where it cannot be, or
        where the patch would lose or add a placeholder."""
        fixed = patched(self.written, self.differences, translations) if self.differences and self.written else None
        wanted = list(self.spans) if self.spans is not None else spans_of(self.written)[1]
        return fixed if fixed is not None and holds_spans(fixed, wanted) else None

    def answer(self, output: str, translations: Mapping[str, Sequence[str]], fill: bool) -> str:
        """The sentence's translation given the model's `output` and asks()'s `translations`: the target patched,
        else as mtkit.memory.patching.answer chooses; the output where the match's spans could not be given the
        sentence's (no `written`)."""
        if not self.written:
            return output
        fixed = self.patched(translations)
        if fixed is None and self.spans is not None:
            return output  # the target holds the match's spans, not the sentence's: never offered
        return fixed if fixed is not None else answer(output, self.written, fill)


def normalised(text: str) -> str:
    """White space collapsed to one space and stripped: the text an exact match compares."""
    return _SPACE.sub(" ", text).strip()


def key_version() -> str:
    """What a saved index's keys and terms depend on besides FORMAT (mtkit.memory.index_files): the protected
    patterns, the stand-in and the word pattern, hashed; an index saved under others is built again."""
    text = "\n".join([*DEFAULT_PATTERNS.values(), *_PROTECT.patterns, _MAY_SPAN.pattern, SPAN, _WORD.pattern])
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def spans_of(text: str) -> tuple[str, list[str]]:
    """The normalised text with each protected span as SPAN, and the spans' texts in order."""
    return _spans_of_normalised(normalised(text))


def _spans_of_normalised(text: str) -> tuple[str, list[str]]:
    if _MAY_SPAN.search(text) is None:
        return text, []
    places = _PROTECT.spans(text)
    pieces, at = [], 0
    for low, high in places:
        pieces += [text[at:low], SPAN]
        at = high
    return "".join(pieces) + text[at:], [text[low:high] for low, high in places]


def key_of(text: str) -> int:
    """The exact lookup's key: 8 bytes of BLAKE2b of the normalised source with its spans as SPAN."""
    return _key_of_normalised(normalised(text))


def _key_of_normalised(text: str) -> int:
    skeleton = _spans_of_normalised(text)[0]
    return int.from_bytes(hashlib.blake2b(skeleton.encode("utf-8"), digest_size=8).digest(), "little")


def holds_spans(text: str, spans: list[str]) -> bool:
    """Whether `text` holds exactly these protected spans (placeholders, numbers, URLs), in any order."""
    return sorted(spans_of(text)[1]) == sorted(spans)


def ends_like(sentence: str, target: str) -> str:
    """The target without the white space at an end where the sentence has none: a stored "...\n" answers a
    sentence that ends at its full stop (the lookup compares texts with their white space normalised)."""
    if not sentence[:1].isspace():
        target = target.lstrip()
    return target if sentence[-1:].isspace() else target.rstrip()


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


def word_hash(word: str) -> int:
    """A word's 8-byte BLAKE2b, from which its terms' keys are made (term_keys): the term index keeps them sorted, so
    a saved index is searched where it lies, never read into a dict. Two terms of one key (odds about 1e-7 at ten
    million terms) only cost candidates."""
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")


@dataclass(frozen=True)
class IndexArrays:
    """What a MemoryIndex is made of, as mtkit.memory.index_files keeps it on disk: the normalised sources and the
    targets as UTF-8 (segment i is text[offsets[i]:offsets[i + 1]]), the exact keys sorted with the first segment
    of each, the term index as sorted term keys (term_keys: a source's words and its pairs of adjacent words) and
    one CSR array (postings[starts[t]:starts[t + 1]] are the segments holding term t, in order) with each one's
    normalised source length in characters beside it, so the length bound filters postings as they lie."""

    sources: bytes | mmap.mmap
    source_offsets: np.ndarray  # int64, one more than segments
    targets: bytes | mmap.mmap
    target_offsets: np.ndarray  # int64
    keys: np.ndarray  # uint64, sorted, unique
    key_positions: np.ndarray  # int32: the first segment of each key, as the file ordered duplicates
    terms: np.ndarray  # uint64 term keys, sorted
    starts: np.ndarray  # int64, one more than terms
    postings: np.ndarray  # int32
    posting_lengths: np.ndarray  # uint16 (a longer source as 65535)
    # The entries after the segments are fragments of them (mtkit.memory.fragments): each one's segment, int32.
    fragment_of: np.ndarray


def term_keys(words: list[str]) -> np.ndarray:
    """A text's terms, from its lower-cased words in order: each word's hash, and each pair of adjacent words' (the
    first's hash times an odd constant plus the second's, modulo 2**64). A pair is rarer than either word, so a
    lookup counts the many pairs it shares with a near match while reading few postings."""
    hashes = np.fromiter((word_hash(word) for word in words), dtype=np.uint64, count=len(words))
    return np.concatenate([hashes, hashes[:-1] * _MIX + hashes[1:]])


def index_arrays(
    pairs: Iterable[tuple[str, str]], languages: Callable[[], tuple[str | None, str | None]] | None = None
) -> IndexArrays:
    """The pairs, in order, as an index's arrays; with `languages` (the memory's, asked once the pairs have been
    read), their fragments after them (mtkit.memory.fragments)."""
    sources, targets = bytearray(), bytearray()
    source_offsets, target_offsets, lengths = array("q", [0]), array("q", [0]), array("i")
    keys: list[int] = []
    vocabulary: dict[str, int] = {}
    adjacent: dict[tuple[int, int], int] = {}  # a pair of word ids' term: -1 - its number
    term_ids, segment_ids = array("i"), array("i")
    cut: list[tuple[int, str, str]] = []  # the entries that may cut into fragments: (segment, source, target)

    def add(position: int, source: str, target: str) -> None:
        nonlocal sources, targets
        text = normalised(source)
        keys.append(_key_of_normalised(text))
        sources += text.encode("utf-8")
        targets += target.encode("utf-8")
        source_offsets.append(len(sources))
        target_offsets.append(len(targets))
        lengths.append(len(text))
        ids = [vocabulary.setdefault(word, len(vocabulary)) for word in _WORD.findall(text.lower())]
        terms = set(ids).union([adjacent.setdefault(pair, -1 - len(adjacent)) for pair in zip(ids, ids[1:])])
        term_ids.extend(terms)
        segment_ids.extend([position] * len(terms))

    count = 0
    for count, (source, target) in enumerate(pairs, start=1):
        add(count - 1, source, target)
        if languages is not None and may_cut(source):
            cut.append((count - 1, source, target))
    fragment_of = array("i")
    if cut and languages is not None:
        named = languages()
        for segment, source, target in cut:
            for piece, translation in fragments_of(source, target, named):
                add(count + len(fragment_of), piece, translation)
                fragment_of.append(segment)
    unique_keys, first = np.unique(np.asarray(keys, dtype=np.uint64), return_index=True)
    hashes = np.fromiter((word_hash(word) for word in vocabulary), dtype=np.uint64, count=len(vocabulary))
    pairs_of = np.asarray(list(adjacent), dtype=np.int64).reshape(-1, 2)
    term_hashes = np.concatenate([hashes, hashes[pairs_of[:, 0]] * _MIX + hashes[pairs_of[:, 1]]])
    order = np.argsort(term_hashes, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    ids = np.frombuffer(term_ids, dtype=np.int32).astype(np.int64)
    ranked = rank[np.where(ids >= 0, ids, len(vocabulary) - 1 - ids)]
    counts = np.bincount(ranked, minlength=len(order))
    postings = np.frombuffer(segment_ids, dtype=np.int32)[np.argsort(ranked, kind="stable")]
    clipped = np.minimum(np.frombuffer(lengths, dtype=np.int32), np.iinfo(np.uint16).max).astype(np.uint16)
    return IndexArrays(
        sources=bytes(sources),
        source_offsets=np.frombuffer(source_offsets, dtype=np.int64),
        targets=bytes(targets),
        target_offsets=np.frombuffer(target_offsets, dtype=np.int64),
        keys=unique_keys,
        key_positions=first.astype(np.int32),
        terms=term_hashes[order],
        starts=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        postings=postings,
        posting_lengths=clipped[postings],
        fragment_of=np.frombuffer(fragment_of, dtype=np.int32).copy(),
    )


class Texts(Sequence[str]):
    """A memory's sources or targets by position, each decoded from the UTF-8 only when asked for."""

    def __init__(self, blob: bytes | mmap.mmap, offsets: np.ndarray) -> None:
        self._blob, self._offsets = blob, offsets

    def __len__(self) -> int:
        return len(self._offsets) - 1

    @overload
    def __getitem__(self, position: int) -> str: ...
    @overload
    def __getitem__(self, position: slice) -> list[str]: ...
    def __getitem__(self, position: int | slice) -> str | list[str]:
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(len(self)))]
        if position < 0:
            position += len(self)
        if not 0 <= position < len(self):
            raise IndexError(position)
        return self._blob[int(self._offsets[position]) : int(self._offsets[position + 1])].decode("utf-8")


class MemoryIndex:
    """A memory's segments, (source, target) in order, indexed for exact and fuzzy lookup: built from the pairs, or
    from arrays saved once (mtkit.memory.index_files), which answer the same. `memory_id` names the memory they came
    from, for a caller that marks them used."""

    def __init__(
        self,
        pairs: Iterable[tuple[str, str]] = (),
        memory_id: str = "",
        arrays: IndexArrays | None = None,
        languages: Callable[[], tuple[str | None, str | None]] | None = None,
    ):
        self.memory_id = memory_id
        self.arrays = index_arrays(pairs, languages) if arrays is None else arrays
        self._count = len(self.arrays.source_offsets) - 1 - len(self.arrays.fragment_of)
        self.sources = Texts(self.arrays.sources, self.arrays.source_offsets)  # normalised; fragments after
        self.targets = Texts(self.arrays.targets, self.arrays.target_offsets)

    def segment(self, position: int) -> int:
        """The memory's segment an entry of the index is (a fragment's: the segment it was cut from)."""
        return position if position < self._count else int(self.arrays.fragment_of[position - self._count])

    def __len__(self) -> int:
        return self._count

    def source(self, position: int) -> str:
        """A segment's normalised source."""
        return self.sources[position]

    def target(self, position: int) -> str:
        return self.targets[position]

    def exact_match(self, sentence: str) -> Match | None:
        """The segment whose normalised source, spans aside, is the sentence's; its target given the sentence's
        spans. A hash collision is caught by comparing the keys' texts."""
        key = np.uint64(key_of(sentence))
        row = int(np.searchsorted(self.arrays.keys, key))
        if row == len(self.arrays.keys) or self.arrays.keys[row] != key:
            return None
        position = int(self.arrays.key_positions[row])
        skeleton, new = spans_of(sentence)
        source = self.source(position)
        stored, old = spans_of(source)
        if stored != skeleton:
            return None
        target = self.target(position)
        return Match(100, source, target, self.segment(position), ends_like(sentence, carried(target, old, new)))

    def _term_rows(self, sentence: str) -> np.ndarray:
        """The rows of the term index of the sentence's terms the memory holds."""
        terms = self.arrays.terms
        keys = np.unique(term_keys(_WORD.findall(sentence.lower())))
        if not len(terms) or not len(keys):
            return np.empty(0, dtype=np.int64)
        rows = np.minimum(np.searchsorted(terms, keys), len(terms) - 1)
        return rows[terms[rows] == keys]

    def candidates(self, sentence: str, threshold: int) -> np.ndarray:
        """The positions, in order, of at most CANDIDATES sources sharing most of the sentence's rarer terms (words
        and pairs of adjacent words), within the lengths a ratio at `threshold` allows (ratio <= 2 * min(len) /
        (len a + len b)). The terms are taken rarest first, at most RARE_TERMS of them, while their postings total
        at most POSTINGS (the rarest alone, cut to POSTINGS, when it holds more), so a lookup's work is bounded
        however large the memory: a source sharing only common words with the sentence may go unseen."""
        rows = self._term_rows(sentence)
        if not len(rows):
            return np.empty(0, dtype=np.int32)
        starts = self.arrays.starts
        sizes = starts[rows + 1] - starts[rows]
        order = np.lexsort((rows, sizes))[:RARE_TERMS]
        taken = rows[order[: max(int(np.searchsorted(np.cumsum(sizes[order]), POSTINGS, side="right")), 1)]]
        spans = [(int(starts[r]), int(min(starts[r + 1], starts[r] + POSTINGS))) for r in taken]
        found = np.concatenate([self.arrays.postings[a:b] for a, b in spans])
        lengths = np.concatenate([self.arrays.posting_lengths[a:b] for a, b in spans])
        length = len(normalised(sentence))
        share = threshold / 200
        low, high = length * share / (1 - share), length * (1 - share) / share if share else np.inf
        found = np.sort(found[(lengths >= low) & (lengths <= high)])
        if len(found) <= 1:
            return found
        # Each source once, with how many of the taken terms it holds: the runs of the sorted postings (np.unique's
        # answer, without its extra passes).
        firsts = np.flatnonzero(np.concatenate(([True], found[1:] != found[:-1])))
        if len(firsts) <= CANDIDATES:
            return found[firsts]
        counts = np.diff(np.append(firsts, len(found)))
        return np.sort(found[firsts[np.argpartition(-counts, CANDIDATES)[:CANDIDATES]]])

    def best(self, sentence: str, threshold: int = DEFAULT_THRESHOLD) -> Match | None:
        """The exact match, else the best fuzzy one scoring at least `threshold` (the earliest of equals), its
        translation set where the sentence differs from it only in placeables (mtkit.memory.repair)."""
        exact = self.exact_match(sentence)
        if exact is not None:
            return exact
        match = self.fuzzy_match(sentence, threshold)
        if match is None:
            return None
        new, old = spans_of(sentence)[1], spans_of(match.source)[1]
        if len(new) != len(old):  # spans the sentence's cannot replace one by one
            # A repair that adds or takes out the spans the two differ by ("%s: " before a message) answers it; else
            # a patch may, where the model's translations of the differing parts, spans and all, give the sentence's.
            fixed = repaired(sentence, match.source, match.target)
            if fixed is not None and holds_spans(fixed, new):
                return replace(match, translation=ends_like(sentence, fixed))
            found = differences(sentence, match.source)
            written = ends_like(sentence, match.target)
            return replace(match, differences=found, written=written, spans=tuple(new)) if found else match
        # The match written with the sentence's own spans, as an exact match's target is.
        source, target = carried(match.source, old, new), carried(match.target, old, new)
        fixed = repaired(sentence, source, target)
        if fixed is None:
            return replace(match, differences=differences(sentence, source), written=ends_like(sentence, target))
        return replace(match, translation=ends_like(sentence, fixed))

    def fuzzy_match(self, sentence: str, threshold: int = DEFAULT_THRESHOLD) -> Match | None:
        """The best fuzzy match scoring `threshold` to 99 (the earliest of equals), whatever the exact one."""
        from rapidfuzz import fuzz, process  # the serve extra's; a memory is only indexed where it is installed

        positions = self.candidates(sentence, threshold)
        if not len(positions):
            return None
        offsets, blob = self.arrays.source_offsets, self.arrays.sources
        texts = [
            blob[a:b].decode("utf-8") for a, b in zip(offsets[positions].tolist(), offsets[positions + 1].tolist())
        ]
        # A sentence with protected spans (placeholders, numbers, a catalog string's stand-ins) is scored with each
        # span as one mark on both sides, as its exact match is keyed: "Binary files 1 and 2 differ" is then as near
        # "Files %s and %s differ" as the string it was masked from.
        skeleton, spans = spans_of(sentence)
        keys = [spans_of(text)[0] for text in texts] if spans else texts
        # All candidates scored in one call, in float64 as fuzz.ratio scores one pair, then floored as CAT tools show
        query = skeleton if spans else normalised(sentence)
        scores = np.floor(process.cdist([query], keys, scorer=fuzz.ratio, dtype=np.float64)[0])
        scores[(scores < threshold) | (scores >= 100)] = -1
        rank = scores
        if spans:  # among equal scores the one nearest as written ("number 7" for "number 7!", not "number 0")
            written = process.cdist([normalised(sentence)], texts, scorer=fuzz.ratio, dtype=np.float64)[0]
            rank = np.where(scores < 0, -1.0, scores * 1000 + written)
        best = int(np.argmax(rank))  # the first of equals: the earliest segment
        if scores[best] < 0:
            return None
        position = int(positions[best])
        return Match(int(scores[best]), texts[best], self.target(position), self.segment(position))
