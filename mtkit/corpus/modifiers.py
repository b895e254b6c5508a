"""Training-time modifiers of the text, in the spirit of OpusTrainer's (upper case, title case, typos, end punctuation
removed, sentences merged), so that a model survives real input: the [modifiers] config, the pure text functions
(each drawing from an explicit random.Random) and BatchModifier, which applies them to a training batch's token ids
(decoded with the run's sentencepiece model, modified, encoded again) from a seed of (train.seed, epoch, rank, batch
position) alone, as mtkit.corpus.subword_sampling draws; the term hints (mtkit.corpus.term_hints) are put in after
them, from a seed of their own. No torch: numpy and the stdlib (the tokenizer is passed in).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

import numpy as np

from mtkit.corpus.term_hints import TermHintsConfig, add_hints, tokens
from mtkit.errors import check

if TYPE_CHECKING:
    from mtkit.corpus.subword_sampling import BatchResampler
    from mtkit.corpus.term_alignments import TermLinks
    from mtkit.tokenizer import Tokenizer


@dataclass
class ModifiersConfig:
    """[modifiers]: each field a probability; 0 (the default) turns it off. upper_case, title_case and merge draw once
    per batch and change all its lines, so that its lines keep one length: drawn per line, a batch's few capitalised
    (~4x the pieces) or merged (2-3x) lines made it 1.4-2x slower to train on the Multi30k small recipe, and on a
    CPU budget of minutes that cost more updates than the modifiers gave. typos and remove_end_punct draw per line."""

    upper_case: float = field(default=0.0, metadata={"help": "Both sides in capitals."})
    # Not str.title(), which lower-cases the rest: "iPhone" becomes "IPhone", not "Iphone".
    title_case: float = field(
        default=0.0,
        metadata={
            "help": "Both sides: each space-separated word's first character upper-cased and the rest kept as it is, "
            "as OpusTrainer's TitleCase does."
        },
    )
    typos: float = field(default=0.0, metadata={"help": "The source only: one to three character typos."})
    remove_end_punct: float = field(
        default=0.0,
        metadata={"help": "Both sides lose their final punctuation when both end with the same kind."},
    )
    merge: float = field(
        default=0.0,
        metadata={
            "help": "The pair joined with the next one or two pairs of its batch: two or three sentences a line."
        },
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            check(0.0 <= value <= 1.0, f"modifiers.{f.name} must be in [0, 1] (0: off), got {value}")

    def enabled(self) -> list[str]:
        """The names of the modifiers that are on."""
        return [f.name for f in fields(self) if getattr(self, f.name) > 0]


def upper_case(text: str) -> str:
    return text.upper()


def title_case(text: str) -> str:
    """Each space-separated word's first character upper-cased, the rest as it is; the spacing kept."""
    return re.sub(r"\S+", lambda word: word[0][0].upper() + word[0][1:], text)


# Kinds of final punctuation (full stop, exclamation, question, comma, colon, semicolon), ASCII and the full-width,
# Devanagari and Arabic marks: a pair loses its final marks only when both sides end with the same kind.
END_PUNCT = (".。．｡।۔", "!！", "?？؟", ",，、،", ":：", ";；؛")


def remove_end_punct(src: str, tgt: str) -> tuple[str, str]:
    """Both sides without their final run of punctuation marks and the spaces before it, when both end with marks
    of the same kind and something is left of each; else the pair as it is."""
    ends = src.rstrip()[-1:], tgt.rstrip()[-1:]
    for kind in END_PUNCT:
        if all(end and end in kind for end in ends):
            stripped = src.rstrip().rstrip(kind).rstrip(), tgt.rstrip().rstrip(kind).rstrip()
            return stripped if all(stripped) else (src, tgt)
    return src, tgt


TYPO_KINDS = ("swap", "delete", "repeat", "replace")
_WORD = re.compile(r"[^\W\d_]{2,}")  # a run of two letters or more: a word of one letter never gets a typo
_KEY_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def _key_neighbours() -> dict[str, str]:
    """The keys around each letter key of a QWERTY keyboard. Each row sits half a key right of the one above, so
    key c of a row touches keys c and c+1 of the row above and c-1 and c of the row below."""
    near: dict[str, str] = {}
    for r, row in enumerate(_KEY_ROWS):
        for c, key in enumerate(row):
            around = [(r, c - 1), (r, c + 1), (r - 1, c), (r - 1, c + 1), (r + 1, c - 1), (r + 1, c)]
            near[key] = "".join(
                _KEY_ROWS[i][j] for i, j in around if 0 <= i < len(_KEY_ROWS) and 0 <= j < len(_KEY_ROWS[i])
            )
    return near


KEY_NEIGHBOURS = _key_neighbours()


def add_typos(text: str, rng: random.Random) -> str:
    """One to three character typos, each in a word of two letters or more drawn anew: two neighbouring letters
    swapped, a letter deleted, a letter repeated, or a letter replaced by a neighbouring QWERTY key (a letter off
    that keyboard, such as ä or a Cyrillic one, by another letter of the same text). The case of a letter is kept."""
    for _ in range(rng.randint(1, 3)):
        text = _typo(text, rng)
    return text


def _typo(text: str, rng: random.Random) -> str:
    words = [match.span() for match in _WORD.finditer(text)]
    if not words:
        return text
    start, end = rng.choice(words)
    kind = rng.choice(TYPO_KINDS)
    if kind == "swap":
        swappable = [i for i in range(start, end - 1) if text[i] != text[i + 1]]
        if swappable:
            i = rng.choice(swappable)
            return text[:i] + text[i + 1] + text[i] + text[i + 2 :]
        kind = "delete"  # "aa": a swap would change nothing
    i = rng.randrange(start, end)
    if kind == "delete":
        return text[:i] + text[i + 1 :]
    if kind == "repeat":
        return text[:i] + text[i] + text[i:]
    return text[:i] + _wrong_letter(text[i], text, rng) + text[i + 1 :]


def _wrong_letter(letter: str, text: str, rng: random.Random) -> str:
    lower = letter.lower()
    choices = KEY_NEIGHBOURS.get(lower) or [c for c in text.lower() if c.isalpha() and c != lower]
    if not choices:
        return letter
    new = rng.choice(choices)
    return new.upper() if letter.isupper() else new


@dataclass(frozen=True)
class ModifiedLine:
    """One line a batch's pairs became: the positions in the batch of the pairs it holds (one, or two or three
    merged) and its text; `changed` false: the pair as it was."""

    pairs: tuple[int, ...]
    src: str
    tgt: str
    changed: bool


def modify_pairs(
    pairs: Sequence[tuple[str, str]],
    cfg: ModifiersConfig,
    rng: random.Random,
    groups: Sequence[Hashable] | None = None,
) -> list[ModifiedLine]:
    """The lines that a batch's (source, target) pairs become. With probability cfg.merge the batch is merged: each
    pair joined with the next one or two (as many as drawn, a space between, source to source and target to target)
    of the same group (`groups`: one key per pair, such as the ids preprocess put before its source; None: one
    group), which then make no line of their own. With probability cfg.upper_case (else cfg.title_case) every line
    is in capitals (title case). Then each line: end punctuation removed, typos in the source, each with its
    probability."""
    merge = rng.random() < cfg.merge
    upper = rng.random() < cfg.upper_case
    title = not upper and rng.random() < cfg.title_case
    case = upper_case if upper else title_case if title else None
    merged: list[ModifiedLine] = []
    i = 0
    while i < len(pairs):
        size = rng.choice((2, 3)) if merge else 1
        end = i + 1
        while end < min(i + size, len(pairs)) and (groups is None or groups[end] == groups[i]):
            end += 1
        src, tgt = (" ".join(pair[side] for pair in pairs[i:end]) for side in (0, 1))
        merged.append(ModifiedLine(tuple(range(i, end)), src, tgt, end - i > 1))
        i = end
    return [_modify_line(line, cfg, rng, case) for line in merged]


def _modify_line(
    line: ModifiedLine, cfg: ModifiersConfig, rng: random.Random, case: Callable[[str], str] | None
) -> ModifiedLine:
    src, tgt = line.src, line.tgt
    if rng.random() < cfg.remove_end_punct:
        src, tgt = remove_end_punct(src, tgt)
    if case is not None:
        src, tgt = case(src), case(tgt)
    if rng.random() < cfg.typos:
        src = add_typos(src, rng)
    return ModifiedLine(line.pairs, src, tgt, line.changed or (src, tgt) != (line.src, line.tgt))


@dataclass(frozen=True)
class TermHints:
    """What putting term hints in a batch needs: the [term_hints] config, each training sentence's links
    (mtkit.corpus.term_alignments.TermLinks) and the run's reserved pieces."""

    cfg: TermHintsConfig
    links: TermLinks
    pieces: tuple[str, ...]

    def line(
        self, line: ModifiedLine, pairs: Sequence[tuple[str, str]], rows: Sequence[int], rng: random.Random
    ) -> ModifiedLine:
        """`line` with term hints in its source (add_hints): the links of each pair it holds, shifted by the tokens
        of the pairs before it (a merged line). The modifiers keep every token but a final punctuation mark (typos
        change letters, capitals a word's case), so the links still point at their words; a line with more tokens
        than its pairs had gets none."""
        links, src_at, tgt_at = [], 0, 0
        for k in line.pairs:
            links += [(i + src_at, j + tgt_at) for i, j in self.links.links(int(rows[k]))]
            src_at, tgt_at = src_at + len(tokens(pairs[k][0])), tgt_at + len(tokens(pairs[k][1]))
        if len(tokens(line.src)) > src_at or len(tokens(line.tgt)) > tgt_at:
            return line
        src = add_hints(line.src, line.tgt, links, self.cfg, rng, self.pieces)
        return line if src == line.src else ModifiedLine(line.pairs, src, line.tgt, True)


@dataclass
class BatchModifier:
    """What training asks: the pairs of one batch modified (modify_pairs) and given term hints (`hints`), then
    handed to `then` (subword regularization, mtkit.corpus.subword_sampling.BatchResampler) when there is one. A pair
    no modifier changed keeps its stored ids, and so do the pairs of a line whose ids would pass `max_len` (each as
    its own line)."""

    tokenizer: Tokenizer  # the run's sentencepiece model
    cfg: ModifiersConfig
    leads: np.ndarray  # per training sentence (index into the training data): the ids preprocess put before it
    seed: int
    rank: int
    max_len: int
    then: BatchResampler | None = None
    hints: TermHints | None = None

    def __call__(
        self, src: list[np.ndarray], tgt: list[np.ndarray], indices: np.ndarray, position: int, epoch: int
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        src, tgt, indices = self.modify(src, tgt, indices, position, epoch)
        return (src, tgt) if self.then is None else self.then(src, tgt, indices, position, epoch)

    def modify(
        self, src: list[np.ndarray], tgt: list[np.ndarray], indices: np.ndarray, position: int, epoch: int
    ) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
        """The batch's modified sources and targets, and for each line the training sentence whose leading ids
        (language token, tag) its source keeps: the first of the pairs it holds."""
        # Imported here: `import mtkit.recipe` (ModifiersConfig) stays free of sentencepiece.
        from mtkit.corpus.subword_sampling import batch_seed

        leads = self.leads[indices].tolist()
        texts = self.tokenizer.decode([seq[lead:].tolist() for seq, lead in zip(src, leads)])
        targets = self.tokenizer.decode([seq.tolist() for seq in tgt])
        groups = [tuple(seq[:lead].tolist()) for seq, lead in zip(src, leads)]
        rng = random.Random(batch_seed(self.seed, epoch, position, self.rank, "modifiers"))
        pairs = list(zip(texts, targets))
        lines = modify_pairs(pairs, self.cfg, rng, groups)
        if self.hints is not None:  # a stream of their own: turning hints on leaves the modifiers' draws as they were
            rng = random.Random(batch_seed(self.seed, epoch, position, self.rank, "term_hints"))
            lines = [self.hints.line(line, pairs, indices, rng) for line in lines]
        changed = [line for line in lines if line.changed]
        encoded = iter(
            zip(
                self.tokenizer.encode([line.src for line in changed]),
                self.tokenizer.encode_target([line.tgt for line in changed]),
            )
        )
        out_src, out_tgt, rows = [], [], []
        for line in lines:
            first = line.pairs[0]
            if line.changed:
                src_ids, tgt_ids = next(encoded)
                if leads[first] + len(src_ids) <= self.max_len and len(tgt_ids) <= self.max_len:
                    lead = src[first][: leads[first]]
                    out_src.append(np.concatenate([lead, np.asarray(src_ids, dtype=lead.dtype)]))
                    out_tgt.append(np.asarray(tgt_ids, dtype=tgt[first].dtype))
                    rows.append(indices[first])
                    continue
            for k in line.pairs:  # unchanged, or too long: the pairs as stored
                out_src.append(src[k])
                out_tgt.append(tgt[k])
                rows.append(indices[k])
        return out_src, out_tgt, np.asarray(rows, dtype=np.asarray(indices).dtype)
