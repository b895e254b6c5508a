"""Term hints in training, in the spirit of OpusTrainer's tags: the [term_hints] config, the three pieces a run
trained with them reserves in its sentencepiece vocabulary, and the pure functions that put a sentence's aligned
source spans' targets inline between those pieces (`__source__ dog __target__ Hund __done__`), each drawing from an
explicit random.Random. Where in a batch they are applied is mtkit.corpus.modifiers.BatchModifier's; the links come
from mtkit.corpus.term_alignments. Stdlib only: the engines read the pieces without numpy or torch.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mtkit.errors import check

if TYPE_CHECKING:
    from mtkit.tokenizer import TableTokenizer, Tokenizer

# OpusTrainer's names: a hint is `__source__ x __target__ y __done__`. Reserved as user-defined pieces, so each is one
# piece wherever it is written; a run trained without them has none, and its search and its glossaries are as before.
TERM_PIECES = ("__source__", "__target__", "__done__")
# What the alignments link: words and single punctuation marks (eflomal aligns them space-separated). A span's
# ends are word tokens, so a hint never begins or ends inside a word.
TOKEN = re.compile(r"\w+|[^\w\s]")
MAX_SPAN = 3  # source tokens in one term, as the terminology tasks' terms: a word or a short phrase
MIN_WORD = 3  # a term holds a word of at least this many characters: "a", "in a" and "of" are no terms
MAX_TARGET_SPAN = 4  # its target's tokens (German compounds are one word; "the red shirt" may take four)

Link = tuple[int, int]


@dataclass
class TermHintsConfig:
    """[term_hints]: `probability` (0, the default, turns it off) that a training pair gets hints, one to
    `max_terms` aligned source spans each; a `replace` share of the spans has its target in place of the source
    words instead (no pieces), which teaches copying a target written in the source verbatim."""

    probability: float = field(
        default=0.0, metadata={"help": "The probability that a training pair gets hints (0: off)."}
    )
    max_terms: int = field(default=2, metadata={"help": "Aligned source spans hinted in a pair: one to this (1-3)."})
    replace: float = field(
        default=0.1,
        metadata={"help": "The share of the spans whose target takes the source words' place instead (no pieces)."},
    )

    def __post_init__(self) -> None:
        self.probability, self.replace = float(self.probability), float(self.replace)
        check(
            0.0 <= self.probability <= 1.0, f"term_hints.probability must be in [0, 1] (0: off), got {self.probability}"
        )
        check(1 <= self.max_terms <= 3, f"term_hints.max_terms must be 1, 2 or 3, got {self.max_terms}")
        check(0.0 <= self.replace <= 1.0, f"term_hints.replace must be in [0, 1], got {self.replace}")

    @property
    def enabled(self) -> bool:
        return self.probability > 0


def term_pieces(tokenizer: Tokenizer | TableTokenizer) -> tuple[str, ...]:
    """TERM_PIECES when the model has each as a piece of both vocabularies (a run preprocessed for term hints);
    () otherwise (every run trained without them, imported vocabularies)."""
    known = set(tokenizer.pieces()) & set(tokenizer.target_pieces())
    return TERM_PIECES if all(piece in known for piece in TERM_PIECES) else ()


def term_piece_ids(tokenizer: Tokenizer | TableTokenizer) -> tuple[int, ...]:
    """The target ids of the reserved pieces, which a search never emits; () for a model without them."""
    if not term_pieces(tokenizer):
        return ()
    ids = {piece: i for i, piece in enumerate(tokenizer.target_pieces())}
    return tuple(ids[piece] for piece in TERM_PIECES)


def hint(source: str, target: str, pieces: Sequence[str] = TERM_PIECES) -> str:
    """A source term with its target inline: `__source__ source __target__ target __done__`."""
    return f"{pieces[0]} {source} {pieces[1]} {target} {pieces[2]}"


def tokens(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each token of `text` that the alignments link (TOKEN), left to right."""
    return [match.span() for match in TOKEN.finditer(text)]


def aligned_text(text: str) -> str:
    """`text` as the aligner reads it: its tokens separated by single spaces."""
    return " ".join(TOKEN.findall(text))


def aligned_spans(src: Sequence[str], tgt: Sequence[str], links: Sequence[Link]) -> list[tuple[int, int, int, int]]:
    """Every (src_start, src_end, tgt_start, tgt_end) token span pair consistent with `links` (no link leaves it
    from inside), at most MAX_SPAN source and MAX_TARGET_SPAN target tokens, both sides beginning and ending with an
    aligned word token, the source holding a word of MIN_WORD characters: the phrase pairs a term may be. Links
    past either side's tokens are left out (a modifier may have taken the final punctuation away). In source
    order."""
    links = [(i, j) for i, j in links if i < len(src) and j < len(tgt)]
    by_src: dict[int, list[int]] = {}
    for i, j in links:
        by_src.setdefault(i, []).append(j)
    word = [bool(re.match(r"\w", token)) for token in src], [bool(re.match(r"\w", token)) for token in tgt]
    aligned_tgt = {j for _, j in links}
    found = []
    for a in range(len(src)):
        for b in range(a + 1, min(a + MAX_SPAN, len(src)) + 1):
            if not (word[0][a] and word[0][b - 1] and a in by_src and b - 1 in by_src):
                continue
            if max(len(token) for token in src[a:b]) < MIN_WORD:
                continue
            targets = [j for i in range(a, b) for j in by_src.get(i, ())]
            c, d = min(targets), max(targets) + 1
            if d - c > MAX_TARGET_SPAN or not (word[1][c] and word[1][d - 1]):
                continue
            if all(a <= i < b for i, j in links if c <= j < d) and c in aligned_tgt and d - 1 in aligned_tgt:
                found.append((a, b, c, d))
    return found


def add_hints(
    src: str, tgt: str, links: Sequence[Link], cfg: TermHintsConfig, rng: random.Random, pieces: Sequence[str]
) -> str:
    """The source with one to cfg.max_terms aligned spans (drawn among aligned_spans' that do not overlap) given
    their target inline between `pieces`, or, a cfg.replace share of them, replaced by their target; `src` as it is
    when none is drawn (cfg.probability) or none is aligned. The target side is not changed."""
    if rng.random() >= cfg.probability:
        return src
    src_tokens, tgt_tokens = tokens(src), tokens(tgt)
    spans = aligned_spans([src[a:b] for a, b in src_tokens], [tgt[a:b] for a, b in tgt_tokens], links)
    rng.shuffle(spans)
    wanted, taken = rng.randint(1, cfg.max_terms), []
    for span in spans:
        if len(taken) == wanted:
            break
        if all(span[1] <= other[0] or span[0] >= other[1] for other in taken):
            taken.append(span)
    for a, b, c, d in sorted(taken, reverse=True):  # from the end: earlier offsets stay valid
        low, high = src_tokens[a][0], src_tokens[b - 1][1]
        target = tgt[tgt_tokens[c][0] : tgt_tokens[d - 1][1]]
        inline = target if rng.random() < cfg.replace else hint(src[low:high], target, pieces)
        src = src[:low] + inline + src[high:]
    return src
