"""Glossary terms honoured inside beam search (a guided search): each sentence's terms are target token sequences,
and every hypothesis keeps which of them it holds. While a term is unmet its first token gets a bonus; once a
hypothesis emits that token the rest of the term is forced; the word the term ends may not run on; and ending costs
a penalty for each unmet term until the sentence's patience runs out (after which a translation that found no place
for a term ends as any would, and the caller gives that term another way); closing the sentence (a piece that is or
ends with a full stop, ! or ?) costs what ending does, so that a term goes inside its sentence. The model places
each term where it fits, in one search, with no second translation: a light form of lexically constrained decoding
(Hokamp and Liu 2017, Post and Vilar 2018) that keeps one beam.

The bonus counts towards ranking (a hypothesis that holds its terms beats one that ended without them) but not
towards the log-probability a hypothesis reports. Imports torch only: never the model, IO or data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

# Shape letters: B sentences, b sentences still searching, W rows per sentence (1 at the first step, then the
# beam), C terms per sentence, T tokens per term, V vocab.

# Added to the log-prob of an unmet term's first token, and taken from the end of sentence's for each unmet term:
# chosen on Multi30k val with the demo model (BENCHMARKS.md, "Glossaries"): at 6 the guided translations scored
# higher with reference terms, but more of a dense glossary's lines fell back to stand-ins (0.70x the speed without
# a glossary against 0.89x at 8, both before the stopping rule of mtkit.search.beam); at 10 the translations scored
# below those without a glossary.
TERM_BONUS = 8.0
END_PENALTY = 8.0
# Ending is held back for this many target tokens per source token, plus the terms' own tokens and 2 (German runs
# about as long as its English source in tokens).
PATIENCE = 1.2


@dataclass
class TermGuide:
    """The terms of a batch [B, C, T] (-1 past a term's end; a sentence with fewer terms pads with empty ones),
    the pieces that continue a word [V] (they may not follow a term's last token) and the pieces that close a
    sentence [V] (held back as the end is while a term is unmet; None: none). Use `start`, then per step `mask` (on
    each chunk of log-probs), `gained` (for finished hypotheses), `advance`, `ahead` (for the stopping rule) and
    `keep`."""

    terms: Tensor  # [B, C, T] long
    continues_word: Tensor  # [V] bool
    bonus: float = TERM_BONUS
    end_penalty: float = END_PENALTY
    ends_sentence: Tensor | None = None  # [V] bool

    def __post_init__(self) -> None:
        self.t = 0  # the step `mask` last guided
        self.lengths = (self.terms >= 0).sum(dim=2)  # [B, C]; 0: no term
        self.first = self.terms[:, :, 0].clamp(min=0)  # [B, C]
        # Added to a row whose term just ended: -inf on the pieces that would continue its word.
        self.word_end = torch.zeros(self.continues_word.shape, device=self.terms.device).masked_fill(
            self.continues_word, -math.inf
        )
        # The ids of the pieces that close a sentence: a model that would not choose a term otherwise writes it
        # after the full stop ("Ein Hund rennt durch das Gras. Köter."), where the bonus still pays.
        stops = self.ends_sentence
        self.stops = None if stops is None or not bool(stops.any()) else stops.nonzero().squeeze(1)

    def start(self, src_lens: Tensor) -> None:
        """State for the first step: one row per sentence, no term begun or met (empty terms count as met); how
        long each sentence's ending is held back while a term is unmet (PATIENCE of its source length, plus its
        terms' tokens)."""
        n, device = len(src_lens), self.terms.device
        # Per sentence still searching (kept in step with it by `keep`): its index, terms' first tokens and lengths,
        # and the step up to which its ending is held back.
        self.sentence = torch.arange(n, device=device)  # [b]
        self.first_of, self.lengths_of = self.first, self.lengths  # [b, C]
        self.patience = (src_lens.to(device) * PATIENCE).ceil().long() + self.lengths.sum(dim=1) + 2
        # Per row [b, W]: which terms it holds, the term begun (-1: none) and its next position, whether a term
        # ended at its last token, the bonus in its score; and what `mask` adds, made by `_set`.
        met = (self.lengths == 0)[:, None, :]
        current = torch.full((n, 1), -1, dtype=torch.long, device=device)
        zeros = torch.zeros((n, 1), dtype=torch.long, device=device)
        ended = torch.zeros((n, 1), dtype=torch.bool, device=device)
        self._set(met, current, zeros, ended, torch.zeros((n, 1), device=device))

    def _set(self, met: Tensor, current: Tensor, position: Tensor, ended: Tensor, bonuses: Tensor) -> None:
        """The rows' state, and from it what `mask` writes each step: the bonus on each term's first token [b, W, C]
        (unmet terms of rows with none begun), the cost of ending now [b, W], the token a begun term forces next
        [b, W] (-1: none)."""
        self.met, self.current, self.position, self.ended, self.bonuses = met, current, position, ended, bonuses
        unmet = ~met
        self.pending = bool(unmet.any())  # else no bonus or end cost anywhere: most rows late in a search
        self.bonus_of = (unmet & (current < 0)[:, :, None]).to(bonuses.dtype) * self.bonus
        self.end_cost = unmet.sum(dim=2).to(bonuses.dtype) * self.end_penalty
        # A row inside a term is forced on at the term piece's own log-prob: a term that ends in a stop ("Inc.")
        # is not held back by itself.
        self.stop_cost = self.end_cost * (current < 0)
        begun = current >= 0
        if bool(begun.any()):
            of = self.sentence[:, None].expand_as(current)
            forced = self.terms[of, current.clamp(min=0), position.clamp(max=self.terms.size(2) - 1)]
            self.forced = torch.where(begun, forced, -1)
        else:
            self.forced = current  # all -1

    def mask(self, logp: Tensor, rows: slice, eos_id: int, t: int) -> Tensor:
        """The log-probs [r, W, V] at step `t` of the still-searching sentences `rows`, guided: writes into logp
        (fresh each step)."""
        self.t = t
        if self.pending:
            bonus = self.bonus_of[rows]
            logp.scatter_add_(2, self.first_of[rows][:, None, :].expand_as(bonus), bonus)
            # Ending with terms unmet costs `end_penalty` each until the sentence's patience runs out (past it a
            # translation that has found no place for a term would only wander on).
            held = self.patience[rows] > t  # [r]
            logp[..., eos_id] -= self.end_cost[rows] * held[:, None]
            if self.stops is not None:  # closing the sentence is held back as ending is
                logp[..., self.stops] -= (self.stop_cost[rows] * held[:, None])[:, :, None]
        flat = logp.view(-1, logp.size(2))  # rows of [r, W, V]; only the rows that need it are written
        forced = self.forced[rows].reshape(-1)
        taken = (forced >= 0).nonzero().squeeze(1)
        if len(taken):  # the next token of a begun term, at the model's own log-prob; nothing else, no end
            token = forced[taken]
            value = flat[taken, token]
            flat.index_fill_(0, taken, -math.inf)
            flat[taken, token] = value
        ended = self.ended[rows].reshape(-1).nonzero().squeeze(1)  # rows whose term just ended (none begun)
        if len(ended):  # as whole rows: a quarter of the time of writing the columns in place
            flat.index_copy_(0, ended, flat.index_select(0, ended).add_(self.word_end))
        return logp

    def ahead(self) -> Tensor:
        """[b, W]: the most bonus each row can still gain (its unmet terms not begun)."""
        return self.bonus_of.sum(dim=2)

    def gained(self, origin: Tensor) -> Tensor:
        """The bonus in the score of each candidate's origin row [b, n]."""
        return self.bonuses.gather(1, origin)

    def advance(self, origin: Tensor, token: Tensor) -> None:
        """The new rows [b, K]: each from its origin row, extended by its token."""
        met = self.met.gather(1, origin[:, :, None].expand(-1, -1, self.met.size(2)))  # [b, K, C]
        current, position = self.current.gather(1, origin), self.position.gather(1, origin)
        bonuses = self.bonuses.gather(1, origin)
        lengths = self.lengths_of[:, None, :].expand_as(met)  # [b, K, C]
        begun = current >= 0
        if self.stops is not None and self.pending:  # a stop written while held back: its cost only ranks, as the bonus
            closed = torch.isin(token, self.stops) & (self.patience > self.t)[:, None]  # [b, K]
            bonuses = bonuses - self.stop_cost.gather(1, origin) * closed
        # A free row whose token begins unmet terms: the first of them is begun (the bonus went to each).
        starts = ~begun[:, :, None] & ~met & (self.first_of[:, None, :] == token[:, :, None])  # [b, K, C]
        if bool(starts.any()):
            bonuses = bonuses + starts.sum(dim=2).to(bonuses.dtype) * self.bonus
            started = starts.any(dim=2)
            current = torch.where(started, starts.to(torch.int8).argmax(dim=2), current)
            position = torch.where(started, 1, torch.where(begun, position + 1, position))
        else:
            position = torch.where(begun, position + 1, position)
        length = lengths.gather(2, current.clamp(min=0)[:, :, None])[:, :, 0]  # [b, K]
        done = (current >= 0) & (position >= length)
        if bool(done.any()):
            met = met | (done[:, :, None] & (torch.arange(met.size(2), device=met.device) == current[:, :, None]))
            current = torch.where(done, -1, current)
            position = torch.where(done, 0, position)
        self._set(met, current, position, done, bonuses)

    def keep(self, keep: Tensor) -> None:
        """Only the sentences `keep` [b'] (indices into the current ones) search on."""
        self.sentence, self.met, self.current = self.sentence[keep], self.met[keep], self.current[keep]
        self.position, self.ended, self.bonuses = self.position[keep], self.ended[keep], self.bonuses[keep]
        self.first_of, self.lengths_of, self.patience = self.first_of[keep], self.lengths_of[keep], self.patience[keep]
        self.bonus_of, self.end_cost, self.forced = self.bonus_of[keep], self.end_cost[keep], self.forced[keep]
        self.stop_cost = self.stop_cost[keep]


def term_table(terms: list[list[list[int]]], device: torch.device) -> Tensor | None:
    """Each sentence's terms as token ids [B, C, T] (-1 padded), or None when no sentence has a term."""
    wide = max((len(sentence) for sentence in terms), default=0)
    long = max((len(term) for sentence in terms for term in sentence), default=0)
    if wide == 0 or long == 0:
        return None
    table = torch.full((len(terms), wide, long), -1, dtype=torch.long)
    for row, sentence in enumerate(terms):
        for column, term in enumerate(sentence):
            table[row, column, : len(term)] = torch.tensor(term, dtype=torch.long)
    return table.to(device)
