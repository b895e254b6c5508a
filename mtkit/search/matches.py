"""A translation memory's fuzzy match honoured inside beam search: each token of the match's target gets a bonus, and
more where it continues the match in its own order (the token after one the hypothesis has just written), so that a
model trained for neural fuzzy repair (mtkit.corpus.fuzzy_matches: the match after the source, behind ｟fuzzy｠) keeps
the match's words and order where it agrees and writes its own where the source differs. Retrieved translation
pieces rewarded in the search, as Zhang et al. (2018, "Guiding Neural Machine Translation with Retrieved Translation
Pieces") do with a match's aligned n-grams; here the whole match's words and word pairs, since a match of 75% or more
shares most of its source with the sentence.

The bonus counts towards ranking but not towards the log-probability a hypothesis reports (as mtkit.search.terms'),
and each of the match's tokens pays once: a hypothesis gains nothing by writing the match again. A sentence without a
match gets none and is searched as without the guide. Imports torch only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

# Shape letters: B sentences, b sentences still searching, W rows per sentence (1 at the first step, then the
# beam), L tokens of the longest match, V vocab.

# Chosen on the software recipe's validation packages (BENCHMARKS.md, "A model for software strings"): added to the
# log-prob of a token the match holds, and of one that follows the hypothesis's last token in the match.
MATCH_WORD_BONUS = 1.0
MATCH_ORDER_BONUS = 4.0


@dataclass
class MatchGuide:
    """The batch's matches [B, L] (target ids, -1 past a match's end; a sentence without a match all -1). Use as
    mtkit.search.beam takes a guide: `start`, then per step `mask`, `gained`, `advance`, `ahead` and `keep`.

    Each of a match's tokens pays once per hypothesis: a row keeps which of the match's places its tokens took (the
    one after its last place where the token is there, else the first free one), so that the bonus cannot grow with
    length and a hypothesis does not write the match twice."""

    matches: Tensor  # [B, L] long
    vocab: int
    word_bonus: float = MATCH_WORD_BONUS
    order_bonus: float = MATCH_ORDER_BONUS

    def __post_init__(self) -> None:
        self.held = self.matches >= 0  # [B, L]
        self.tokens = self.matches.clamp(min=0)
        self.places = torch.arange(self.matches.size(1), device=self.matches.device)  # [L]

    def start(self, src_lens: Tensor) -> None:
        n, device = len(src_lens), self.matches.device
        self.sentence = torch.arange(n, device=device)  # [b]: each searching sentence's index in the batch
        self.free = self.held[:, None, :].clone()  # [b, W, L]: the match's places no token of the row has taken
        self.at = torch.full((n, 1), -1, dtype=torch.long, device=device)  # [b, W]: the last token's place (-1: none)
        self.bonuses = torch.zeros((n, 1), device=device)  # [b, W]: the bonus in each row's score

    def _place_bonus(self, free: Tensor, at: Tensor) -> Tensor:
        """[r, W, L]: what each free place pays its token: the word bonus, and the order bonus after `at`."""
        after = self.places == at[:, :, None] + 1
        return free.to(torch.float32) * (self.word_bonus + self.order_bonus * after)

    def mask(self, logp: Tensor, rows: slice, eos_id: int, t: int) -> Tensor:
        """The log-probs [r, W, V] of the still-searching sentences `rows` with their matches' bonuses (each token the
        most any of its free places pays; none on the end of sentence, whose place the model knows)."""
        free, at = self.free[rows], self.at[rows]
        index = self.tokens[self.sentence[rows]][:, None, :].expand_as(free)
        bonus = torch.zeros_like(logp).scatter_reduce_(2, index, self._place_bonus(free, at).to(logp.dtype), "amax")
        bonus[..., eos_id] = 0.0
        return logp.add_(bonus)

    def ahead(self) -> Tensor:
        """[b, W]: the most bonus each row can still gain (its free places)."""
        return self.free.sum(dim=2).to(self.bonuses.dtype) * (self.word_bonus + self.order_bonus)

    def gained(self, origin: Tensor) -> Tensor:
        """The bonus in the score of each candidate's origin row [b, n]."""
        return self.bonuses.gather(1, origin)

    def advance(self, origin: Tensor, token: Tensor) -> None:
        """The new rows [b, K]: each from its origin row, extended by its token, which takes the place that paid."""
        free = self.free.gather(1, origin[:, :, None].expand(-1, -1, self.free.size(2)))  # [b, K, L]
        at = self.at.gather(1, origin)
        pays = self._place_bonus(free, at) * (self.tokens[self.sentence][:, None, :] == token[:, :, None])
        best, place = pays.max(dim=2)  # [b, K]
        took = best > 0
        self.free = free & ~(took[:, :, None] & (self.places == place[:, :, None]))
        self.at = torch.where(took, place, -2)
        self.bonuses = self.bonuses.gather(1, origin) + best

    def keep(self, keep: Tensor) -> None:
        """Only the sentences `keep` [b'] (indices into the current ones) search on."""
        self.sentence, self.free, self.at = self.sentence[keep], self.free[keep], self.at[keep]
        self.bonuses = self.bonuses[keep]


def match_table(sources: list[list[int]], piece: int, to_target: Tensor) -> Tensor | None:
    """Each source's fuzzy match as target ids [B, L] (-1 padded): the source ids after `piece` (the model's
    ｟fuzzy｠), mapped by `to_target` (source id -> target id, -1 for none); None where no source holds one."""
    found = [row[row.index(piece) + 1 :] if piece in row else [] for row in sources]
    longest = max(map(len, found), default=0)
    if longest == 0:
        return None
    table = torch.full((len(found), longest), -1, dtype=torch.long)
    for k, row in enumerate(found):
        if row:
            table[k, : len(row)] = to_target[torch.tensor(row, dtype=torch.long)]
    return table
