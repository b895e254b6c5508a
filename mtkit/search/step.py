"""What every search does through the decoder contract: the Decoder protocol and ModelDecoder (its adapter for
mtkit's Transformer), per-sentence minimum and maximum lengths, the tokens a step may not or must emit, forced
prefixes. Imports torch and mtkit.search.config only: never mtkit.model.transformer, IO or data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from mtkit.search.config import MIN_LENGTH, TranslateConfig

# Shape letters: B sentences, b sentences still searching, N decoder rows, V vocab, P prefix tokens.

# A forced eos that the decoder calls impossible (-inf) still ends the hypothesis, at this log-prob,
# so every sentence gets an output; real decoders (a softmax) never return -inf.
FORCED_EOS_FLOOR = -1e4


class Decoder(Protocol):
    """What search needs from a model; translate.py adapts the Transformer to it."""

    def start(self, src: Tensor, align: bool = False) -> Any:
        """Encode src [B, S] once; return a decode state with B rows (`align`: one whose steps keep `weights`)."""
        ...

    def weights(self, state: Any) -> Tensor:
        """The last step's alignment weights [N, S] of each row over its source (a state started with `align`)."""
        ...

    def step(self, tokens: Tensor, state: Any) -> Any:
        """Feed each row's last token [N] (bos first); advance state; return the step's output, which
        `log_probs` turns into log-probs."""
        ...

    def log_probs(self, output: Any, rows: slice) -> Tensor:
        """Fresh log-probs [r, V] float32 of the output's rows `rows` (search writes into them)."""
        ...

    def reorder(self, state: Any, order: Tensor) -> Any:
        """Return the state whose row n is row order[n] (LongTensor [N']; rows may repeat or go)."""
        ...


def _log_softmax_(logits: Tensor) -> Tensor:
    """log_softmax over the last dim, in place: decode_step's logits are fresh (1.4x F.log_softmax at [1200, 8000])."""
    return torch.ops.aten._log_softmax.out(logits, -1, False, out=logits)


def combine(logps: list[Tensor], mode: str = "log-linear") -> Tensor:
    """An ensemble's log-probabilities from its members': "log-linear", the mean of their log-probabilities (Marian,
    OpenNMT-py), or "linear", the log of the mean of their probabilities (fairseq, Sockeye). One member's are its
    own."""
    if len(logps) == 1:
        return logps[0]
    stacked = torch.stack(logps)
    if mode == "linear":
        return torch.logsumexp(stacked, dim=0) - math.log(len(logps))
    return stacked.mean(dim=0)


class ModelDecoder:
    """The search contract over models with init_decode_state / decode_hidden / project /
    reorder_decode_state (mtkit.model.transformer.Transformer), one or an ensemble.

    An ensemble combines the members' log-probabilities at every step (`combine`, by `mode`). project must return
    fresh logits: they are turned into log-probs in place. `suppressed` ids (a run's reserved term-hint pieces) are
    never emitted: their log-probs are -inf at every step, of every search (beam, greedy, sampling).
    """

    def __init__(self, models: list[Any], mode: str = "log-linear", suppressed: tuple[int, ...] = ()) -> None:
        self.models = models
        self.mode = mode
        self.suppressed = list(suppressed)

    def start(self, src: Tensor, align: bool = False) -> list[Any]:
        return [model.init_decode_state(src, align and k == 0) for k, model in enumerate(self.models)]

    def weights(self, state: list[Any]) -> Tensor:
        return state[0].weights  # an ensemble's first member aligns, as mtkit.engines' attention pass reads it

    def step(self, tokens: Tensor, state: list[Any]) -> list[Tensor]:
        return [m.decode_hidden(tokens, s) for m, s in zip(self.models, state)]  # [N, D] per model

    def log_probs(self, output: list[Tensor], rows: slice) -> Tensor:
        logps = [_log_softmax_(m.project(hidden[rows]).float()) for m, hidden in zip(self.models, output)]
        logp = combine(logps, self.mode)  # [r, V]
        if self.suppressed:
            logp[:, self.suppressed] = -math.inf
        return logp

    def reorder(self, state: list[Any], order: Tensor) -> list[Any]:
        return [m.reorder_decode_state(s, order) for m, s in zip(self.models, state)]


def max_lengths(src_lens: Tensor, a: float, b: int, max_positions: int | None = None) -> Tensor:
    """Most output tokens (eos excluded) per sentence: floor(a * src_len + b), clipped to the decoder.

    src_lens [B] counts each source's own tokens: no padding, no eos (what a reader calls its length).
    The decoder sees bos + tokens and predicts eos at position max_len, so max_len <= max_positions - 1.
    """
    lens = torch.floor(a * src_lens.double() + b).long().clamp(min=0)  # double: same floor as Python
    return lens if max_positions is None else lens.clamp(max=max_positions - 1)


def min_lengths(src_lens: Tensor, max_len: Tensor) -> Tensor:
    """Fewest output tokens (eos excluded) per sentence, as mtkit.search.config.min_length: MIN_LENGTH for a
    non-empty source, never over its maximum; 0 for an empty one."""
    return torch.where(src_lens.to(max_len.device) > 0, max_len.clamp(max=MIN_LENGTH), 0)


def mask_logprobs(
    logp: Tensor, forced: Tensor, *, pad_id: int, bos_id: int, eos_id: int, early: Tensor | None = None
) -> Tensor:
    """Never emit pad or bos (an undertrained model may prefer bos, which decodes to nothing);
    rows where `early` [b] (before their minimum length) may not emit eos; rows where `forced` [b] (at max length)
    may emit only eos. The other tokens keep their log-probs (as fairseq's --min-len; not renormalised). Writes
    into logp (fresh each step): column writes instead of a masked copy of [N, V], which cost twice the
    log-softmax."""
    logp[..., pad_id] = -math.inf
    logp[..., bos_id] = -math.inf
    if early is not None and bool(early.any()):
        early = early.view(early.shape + (1,) * (logp.dim() - 1))  # [b, 1] or [b, 1, 1]
        logp[..., eos_id : eos_id + 1] = logp[..., eos_id : eos_id + 1].masked_fill(early, -math.inf)
    if not bool(forced.any()):  # most steps: skip building the eos-only table
        return logp
    only_eos = torch.full_like(logp, -math.inf)
    only_eos[..., eos_id] = logp[..., eos_id].clamp(min=FORCED_EOS_FLOOR)
    forced = forced.view(forced.shape + (1,) * (logp.dim() - 1))  # [b, 1] or [b, 1, 1]
    return torch.where(forced, only_eos, logp)


def force_tokens(logp: Tensor, token: Tensor | None) -> Tensor:
    """Rows whose `token` [b] is >= 0 may emit only that token, at log-prob 0: a forced target prefix adds nothing
    to the score, as in CTranslate2's target_prefix (its search resets the score to 0 at each prefix step). Rows
    with -1, or token None, are unchanged."""
    if token is None or not bool((token >= 0).any()):
        return logp
    shape = token.shape + (1,) * (logp.dim() - 1)  # [b, 1] or [b, 1, 1]
    index = token.clamp(min=0).view(shape).expand(*logp.shape[:-1], 1)
    only = torch.full_like(logp, -math.inf).scatter_(-1, index, 0.0)
    return torch.where((token >= 0).view(shape), only, logp)


def prefix_step(prefixes: Tensor | None, rows: Tensor, t: int) -> Tensor | None:
    """The token forced at step t on each of `rows` (-1: none), or None once every prefix has ended."""
    if prefixes is None or t >= prefixes.size(1):
        return None
    return prefixes[rows, t]


def with_prefixes(max_len: Tensor, prefixes: Tensor | None) -> Tensor:
    """A prefix longer than a sentence's maximum length raises that maximum to the prefix's length."""
    return max_len if prefixes is None else torch.maximum(max_len, (prefixes >= 0).sum(dim=1))


@dataclass(frozen=True)
class SearchBatch:
    """One batch a search translates: the sources [B, S] and their own lengths [B], the special ids in (pad, bos,
    eos) order (bos: what rows start from and never emit), the positions the decoder holds (None: no bound) and the
    tokens each translation must begin with, `prefixes` [B, P] (-1 past a prefix's end; None for none)."""

    src: Tensor
    src_lens: Tensor
    pad_id: int
    bos_id: int
    eos_id: int
    max_positions: int | None = None
    prefixes: Tensor | None = None

    def lengths(self, cfg: TranslateConfig) -> tuple[Tensor, Tensor]:
        """Each sentence's most and fewest output tokens [B] on the sources' device, a prefix's length included."""
        longest = max_lengths(self.src_lens, cfg.max_len_a, cfg.max_len_b, self.max_positions).to(self.src.device)
        longest = with_prefixes(longest, self.prefixes)
        return longest, min_lengths(self.src_lens, longest)
