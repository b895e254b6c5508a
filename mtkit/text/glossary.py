"""Glossaries: source terms and the target each must become, read from DeepL's entry formats (TSV, CSV) or a
request's object, checked with one-line errors, and found in a sentence as a user expects (longest first, whole
words, case-insensitive, never inside protected text). Applying them is mtkit.text.sentence_plan's: a found term
rides on mtkit.text.protect's stand-ins with its target put back. Pure functions of strings; `errors` only.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mtkit.errors import UserError, check

MAX_FILE_ENTRIES = 100_000  # a glossary file (--glossary, a DeepL glossary's entries)
MAX_REQUEST_ENTRIES = 10_000  # a request's "glossary" object: each request pays for reading it
FORMATS = ("tsv", "csv")
# How a sentence's terms reached the model (a Sentence's `method`): the model's own translation held them all
# ("model"), the source term replaced by its target ("inline"), or by a stand-in with the target put back after
# ("placeholder", which writes every target by construction); for a model trained with term hints, the source term
# followed by its target between the model's reserved pieces (`__source__ term __target__ target __done__`, "hint"),
# which takes the place of "inline" in every method; or the source term left as it is and its target placed by the
# search itself ("guided", mtkit.search.terms; an engine whose search cannot, CTranslate2's, leaves it to the model);
# or the sentence translated as written and the target put in place of the output word the source term is aligned to
# by the model's cross-attention ("replace", for a model that would not choose the target itself).
MODEL, INLINE, PLACEHOLDER, HINT, GUIDED = "model", "inline", "placeholder", "hint", "guided"
REPLACE = "replace"
# How a glossary is applied to a model trained without term hints (SplitOptions.term_method): the ways tried in
# order, a term whose target the translation lacks taking the next way, one it holds keeping its own: "placeholder"
# alone; "inline", then placeholders; "check-first", the model's own translation, then placeholders;
# "check-first-inline", the model's own, then inline, then placeholders; "guided", the search places each target,
# then placeholders; "replace", the target in place of the model's own word, then (where the alignment is too weak)
# placeholders. Not the guided search between them: on Multi30k val (demo model, 100 random terms) it replaced the
# own word in 73 of 82 sentences against 74 without, chrF with swapped references 60.91 against 60.87, and made
# replace 0.41x the speed without a glossary against 0.51x (200 lines, 4.6 terms a line), each retry round a pass.
CHECK_FIRST, CHECK_FIRST_INLINE = "check-first", "check-first-inline"
TERM_METHODS: dict[str, tuple[str, ...]] = {
    PLACEHOLDER: (PLACEHOLDER,),
    INLINE: (INLINE, PLACEHOLDER),
    CHECK_FIRST: (MODEL, PLACEHOLDER),
    CHECK_FIRST_INLINE: (MODEL, INLINE, PLACEHOLDER),
    GUIDED: (GUIDED, PLACEHOLDER),
    REPLACE: (REPLACE, PLACEHOLDER),
}
# The least attention the output words put in a source term's place must give it (of the summed weights of the source
# term's pieces, averaged over an output word's pieces) for its target to go there; below it the alignment is not
# trusted and the term takes the next way. Chosen on Multi30k val with the demo model (the penultimate decoder layer's
# attention, 100 random terms): own word replaced in 71 of 82 sentences at 0.3, 73 at 0.15; since a word holding
# another term's target is never written over (2026-12-02), 74 at 0.15 and at 0, chrF with the target swapped into
# the references 60.87 and 61.27, reference terms' BLEU 40.13 and 40.07, and with 4.6 terms a line 49 and 6 of 200
# lines translated again by stand-ins (0.50x and 0.72x the speed without a glossary): every alignment is trusted.
ALIGNED_MASS = 0.0
# The method a model takes a glossary by unless one is asked (docs/terminology.md: the terms benchmark's figures): a
# model trained with term hints takes its hints first, one model pass where it carries them; one without, on either
# engine, the replace way. On Multi30k val with the demo model (2026-12-02, 100 targets the model would not choose)
# it put the target in place of the model's own word in 74 of 82 sentences (the guided search 22; check-first 80,
# by stand-ins that broke the sentence: chrF with the target swapped into the references 61.27 against 54.88 and
# 57.24), and with reference terms gave BLEU 40.07 (guided 37.51, check-first 38.75, no glossary 37.80); with 4.6
# terms a line it ran at 0.74x the speed without a glossary on mtkit's engine (guided 0.86x; 0.81x once the search
# kept the attention) and 0.75x on CTranslate2 (check-first 0.38x); on the test set at 758a2cb 0.907x and 0.955x.
DEFAULT_TERM_METHOD = REPLACE
HINTED_TERM_METHOD = INLINE


def default_term_method(hints: bool) -> str:
    """The term method of a model trained with term hints (`hints`) or without, where none is asked."""
    return HINTED_TERM_METHOD if hints else DEFAULT_TERM_METHOD


def checked_term_method(method: str, name: str = "term_method") -> str:
    """`method` when it is one of TERM_METHODS; else a UserError naming `name` (an option or a request's field)."""
    check(method in TERM_METHODS, f"{name} must be one of {', '.join(TERM_METHODS)}; got {method!r}")
    return method


def term_ways(method: str, hints: bool, guides: bool = True) -> tuple[str, ...]:
    """The ways `method` tries, in order: TERM_METHODS', "inline" as "hint" for a model trained with term hints,
    "guided" as "model" where the engine's search does not place terms (`guides` False), and "model" left out after
    "replace" (whose translation is the model's own)."""
    renamed = {INLINE: HINT if hints else INLINE, GUIDED: GUIDED if guides else MODEL}
    ways = tuple(renamed.get(way, way) for way in TERM_METHODS[method])
    return tuple(way for k, way in enumerate(ways) if not (way == MODEL and REPLACE in ways[:k]))


def replaced(text: str, alignment: list[list[float]], terms: list[tuple[range, str]]) -> str:
    """`text` (a translation) with each term's target in place of the output word its source words are aligned to:
    `alignment[j][i]`, the attention of output word j (of text.split()) over source word i; `terms`, each term's
    source words and target. A target `text` already holds is left as it is; one whose best output word draws less
    than ALIGNED_MASS, or whose every word another term took or holds its target in, is left out (the caller gives
    it another way). The word's punctuation stays around the target, which takes the sentence's capital where it
    replaces the first word; a source term of several words may take as many neighbouring output words aligned to
    it about as strongly."""
    words = list(re.finditer(r"\S+", text))
    if len(alignment) != len(words):
        return text
    taken: dict[int, tuple[int, str]] = {}  # first output word -> (last, the target written there)
    used = _holding(text, words, [target for _, target in terms])  # a target already there is never written over
    lettered = [j for j, word in enumerate(words) if _core(word.group())[1]]
    for sources, target in terms:
        if holds(text, target):
            continue
        mass = [sum(row[i] for i in sources if i < len(row)) for row in alignment]
        free = [j for j in lettered if j not in used]
        best = max(free, key=lambda j: mass[j], default=None)
        if best is None or mass[best] < ALIGNED_MASS:
            continue
        low = high = best
        strong = max(ALIGNED_MASS, mass[best] / 2)
        while high - low + 1 < len(sources):  # the neighbour aligned more strongly first, while strong enough
            side = [j for j in (low - 1, high + 1) if j in free and mass[j] >= strong]
            if not side:
                break
            nearest = max(side, key=lambda j: mass[j])
            low, high = min(low, nearest), max(high, nearest)
        used.update(range(low, high + 1))
        first = _core(words[low].group())[1]
        if low == 0 and first[:1].isupper() and target[:1].islower():  # the sentence's capital
            target = target[:1].upper() + target[1:]
        taken[low] = (high, _core(words[low].group())[0] + target + _core(words[high].group())[2])
    out, at = [], 0
    for low in sorted(taken):
        high, written = taken[low]
        out += [text[at : words[low].start()], written]
        at = words[high].end()
    return "".join(out) + text[at:]


def _holding(text: str, words: list[re.Match[str]], targets: list[str]) -> set[int]:
    """The output words (indices into `words`) that hold one of `targets` as `holds` finds it."""
    return {
        j
        for target in targets
        for at, end in _places(text, target)
        for j, word in enumerate(words)
        if word.start() < end and at < word.end()
    }


def _core(word: str) -> tuple[str, str, str]:
    """A word as (the punctuation before it, its letters and digits, the punctuation after it); the middle is ""
    for a word without a letter (a number, a stand-in, a mark), which is never replaced."""
    start = next((k for k, char in enumerate(word) if char.isalnum()), len(word))
    end = len(word) - next((k for k, char in enumerate(reversed(word)) if char.isalnum()), len(word))
    core = word[start:end] if start < end else ""
    return word[:start], core if any(char.isalpha() for char in core) else "", word[end:] if core else ""


def hinted(source: str, target: str, pieces: tuple[str, ...]) -> str:
    """A source term with its target inline between a model's three reserved pieces, as it was trained on them."""
    return f"{pieces[0]} {source} {pieces[1]} {target} {pieces[2]}"


def without_pieces(text: str, pieces: tuple[str, ...]) -> str:
    """`text` with no reserved piece left (the engines never search them; this holds whatever a model wrote), each
    taken out with the space before it."""
    if not pieces or not any(piece in text for piece in pieces):
        return text
    return re.sub(" ?(?:" + "|".join(map(re.escape, pieces)) + ")", "", text).strip()


_FIRST_WORD = re.compile(r"\w+")
_START = re.compile(r"(?<!\w)\S")  # where a term may begin (\w is _word's letter, digit or underscore)


@dataclass(frozen=True)
class Glossary:
    """Entries (source term, target term) in the order given; sources unique without regard to case."""

    entries: tuple[tuple[str, str], ...] = ()
    _index: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, list[tuple[str, str, str]]] = {}
        for source, target in self.entries:
            index.setdefault(_key(source.lower()), []).append((source.lower(), source, target))
        for candidates in index.values():
            candidates.sort(key=lambda entry: -len(entry[0]))  # longest first
        object.__setattr__(self, "_index", index)

    def __len__(self) -> int:
        return len(self.entries)

    def find(self, sentence: str, protected: list[tuple[int, int]] = ()) -> list[tuple[int, int, str, str]]:
        """(start, end, source term, target term) of each term found in `sentence`: whole words, case-insensitive,
        the longest first where matches overlap, none touching a `protected` (start, end) span; left to right."""
        if not self.entries:
            return []
        lowered = sentence.lower()
        if len(lowered) != len(sentence):  # a letter whose small form is longer ("İ"): compare letter by letter
            lowered = "".join(char.lower()[:1] for char in sentence)
        found = []
        for start in _starts(sentence):
            for low, source, target in self._index.get(_key(lowered[start:]), ()):
                end = start + len(low)
                if lowered.startswith(low, start) and _whole(sentence, start, end):
                    found.append((start, end, source, target))
        taken: list[tuple[int, int, str, str]] = []
        for match in sorted(found, key=lambda m: (m[0] - m[1], m[0])):
            if all(match[1] <= low or match[0] >= high for low, high, *_ in taken) and all(
                match[1] <= low or match[0] >= high for low, high in protected
            ):
                taken.append(match)
        return sorted(taken)


def holds(text: str, target: str) -> bool:
    """Whether `text` holds `target` as a whole word (no letter, digit or underscore either side), as written or, as
    its first word, with a capital (a sentence begins with one: "Geht ..." holds "geht"). A string search, not a
    pattern: a glossary of thousands of targets would overflow `re`'s cache of compiled ones."""
    return next(_places(text, target), None) is not None


_OPENING = " \t\n\"'(\u201e\u201c\u00bb\u00ab["  # what may stand before a sentence's first word


def _places(text: str, target: str) -> Iterator[tuple[int, int]]:
    """Where `text` holds `target` (see holds), as (start, end)."""
    at = text.find(target)
    while at >= 0:
        if _bounded(text, at, at + len(target)):
            yield at, at + len(target)
        at = text.find(target, at + 1)
    capital = target[:1].upper() + target[1:]
    start = len(text) - len(text.lstrip(_OPENING))
    if capital != target and text.startswith(capital, start) and _bounded(text, start, start + len(capital)):
        yield start, start + len(capital)


def _bounded(text: str, at: int, end: int) -> bool:
    return (at == 0 or not _word(text[at - 1])) and (end == len(text) or not _word(text[end]))


def _key(text: str) -> str:
    """A term's index key: its first word, or its first character where it does not begin with one."""
    word = _FIRST_WORD.match(text)
    return word.group() if word else text[:1]


def _starts(sentence: str) -> list[int]:
    """Where a term may begin: a word's first character, or a character that is neither a word's nor a space."""
    return [found.start() for found in _START.finditer(sentence)]


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _whole(sentence: str, start: int, end: int) -> bool:
    """The match neither begins nor ends inside a word."""
    left = start == 0 or not (_word(sentence[start - 1]) and _word(sentence[start]))
    right = end == len(sentence) or not (_word(sentence[end - 1]) and _word(sentence[end]))
    return left and right


def parse_glossary(text: str, fmt: str, origin: str, limit: int = MAX_FILE_ENTRIES) -> Glossary:
    """DeepL's glossary entries: `fmt` "tsv" (source<TAB>target a line) or "csv" (source,target a row, fields
    quoted as CSV allows; DeepL's optional language columns ignored). A malformed line, an empty side, a source
    given twice with different targets or more than `limit` entries is a UserError naming `origin` and the line."""
    check(fmt in FORMATS, f"{origin}: glossary format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    text = text.removeprefix("\ufeff")
    rows = _tsv_rows(text, origin) if fmt == "tsv" else _csv_rows(text, origin)
    entries: dict[str, tuple[str, str]] = {}
    for line, source, target in rows:
        source, target = source.strip(), target.strip()
        check(source != "" and target != "", f"{origin}:{line}: an entry with an empty side; give source and target")
        known = entries.get(source.lower())
        check(
            known is None or known[1] == target,
            f"{origin}:{line}: {source!r} is given twice with different targets ({known[1] if known else ''!r} "
            f"and {target!r})",
        )
        entries[source.lower()] = (source, target)
        check(len(entries) <= limit, f"{origin}:{line}: more than {limit:,} entries, the limit of a glossary")
    return Glossary(tuple(entries.values()))


def _tsv_rows(text: str, origin: str) -> list[tuple[int, str, str]]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        check(len(fields) == 2, f"{origin}:{number}: expected source<TAB>target, found {len(fields)} field(s)")
        rows.append((number, fields[0], fields[1]))
    return rows


def _csv_rows(text: str, origin: str) -> list[tuple[int, str, str]]:
    rows = []
    reader = csv.reader(text.splitlines(keepends=True), strict=True)
    try:
        for fields in reader:
            if not any(f.strip() for f in fields):
                continue
            check(
                len(fields) in (2, 4),
                f"{origin}:{reader.line_num}: expected source,target (or DeepL's four columns), found "
                f"{len(fields)} field(s)",
            )
            rows.append((reader.line_num, fields[0], fields[1]))
    except csv.Error as exc:
        raise UserError(f"{origin}:{reader.line_num}: malformed CSV: {exc}") from None
    return rows


def load_glossary(path: str | Path) -> Glossary:
    """A glossary file: CSV for a name ending in .csv, else TSV; UTF-8."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise UserError(f"{path}: cannot read the glossary: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: the glossary is not UTF-8 (byte {exc.start})") from None
    return parse_glossary(text, "csv" if path.suffix.lower() == ".csv" else "tsv", str(path))


def glossary_from_mapping(obj: object, field: str = "glossary", limit: int = MAX_REQUEST_ENTRIES) -> Glossary:
    """A request's glossary, {"source term": "target term", ...}: not an object of non-empty strings, a source
    given twice in other letter case with different targets or more than `limit` entries is a UserError naming
    `field`."""
    check(isinstance(obj, dict), f'{field} must be an object of terms, such as {{"dog": "Hund"}}')
    check(len(obj) <= limit, f"{field}: {len(obj):,} entries, over the limit of {limit:,}")
    entries: dict[str, tuple[str, str]] = {}
    for source, target in obj.items():
        check(isinstance(target, str), f"{field}[{source!r}] must be a string; got {type(target).__name__}")
        source, target = source.strip(), target.strip()
        check(source != "" and target != "", f"{field}: an entry with an empty side ({source!r}: {target!r})")
        known = entries.get(source.lower())
        check(known is None or known[1] == target, f"{field}: {source!r} is given twice with different targets")
        entries[source.lower()] = (source, target)
    return Glossary(tuple(entries.values()))
