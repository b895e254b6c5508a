"""Greedy and sampled search: one token per decoder row each step, ended rows dropped as they go.
Imports torch and mtkit's search_step and decoding only (never mtkit.model.transformer); beam search is
mtkit.search.beam.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from mtkit.search.config import MIN_LENGTH, Hypothesis, TranslateConfig, length_penalty
from mtkit.search.step import Decoder, SearchBatch, force_tokens, mask_logprobs, prefix_step

# Shape letters: B sentences, N decoder rows, N' rows still decoding, V vocab, L tokens, P prefix tokens.


def _decode_rows(
    decoder: Decoder,
    state: Any,
    max_len: Tensor,
    min_len: Tensor,
    pick: Callable[[Tensor], Tensor],
    batch: SearchBatch,
    prefixes: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor]:
    """One token per row and step until eos, dropping ended rows; returns tokens [N, L], lengths, log-probs [N].

    No row ends before its `min_len` [N]; `prefixes` [N, P] (-1 past a prefix's end): tokens forced at the first
    steps; the special ids are the batch's.
    """
    pad_id, bos_id, eos_id = batch.pad_id, batch.bos_id, batch.eos_id
    n, device = max_len.size(0), max_len.device
    longest = int(max_len.max()) if n else 0
    tokens = torch.full((n, longest), pad_id, dtype=torch.long, device=device)  # [N, L]
    length = max_len.clone()
    logprob = torch.zeros(n, device=device)
    active = torch.arange(n, device=device)  # [N'] original index of each live row
    last = torch.full((n,), bos_id, dtype=torch.long, device=device)
    for t in range(longest + 1 if n else 0):
        logp = decoder.log_probs(decoder.step(last, state), slice(None))  # [N', V]
        early = min_len[active] > t if t < MIN_LENGTH else None
        logp = mask_logprobs(logp, max_len[active] <= t, pad_id=pad_id, bos_id=bos_id, eos_id=eos_id, early=early)
        logp = force_tokens(logp, prefix_step(prefixes, active, t))
        token = pick(logp)  # [N']
        logprob[active] += logp.gather(1, token[:, None]).squeeze(1)
        ended = token == eos_id
        length[active[ended]] = t
        keep = (~ended).nonzero().squeeze(1)
        if len(keep) == 0:
            break
        tokens[active[keep], t] = token[keep]
        if len(keep) < len(active):  # drop ended rows so later steps compute less
            state = decoder.reorder(state, keep)
        active, last = active[keep], token[keep]
    return tokens, length, logprob


def _to_hypotheses(
    tokens: Tensor, length: Tensor, logprob: Tensor, alpha: float, per_sentence: int
) -> list[list[Hypothesis]]:
    """Group rows (per_sentence consecutive rows each) into per-sentence lists, best first."""
    score = logprob / length_penalty(length + 1, alpha)
    rows = [
        Hypothesis(row[:n], s, lp)
        for row, n, s, lp in zip(tokens.tolist(), length.tolist(), score.tolist(), logprob.tolist())
    ]
    groups = [rows[i : i + per_sentence] for i in range(0, len(rows), per_sentence)]
    return [sorted(group, key=lambda h: -h.score) for group in groups]


def _argmax(logp: Tensor) -> Tensor:
    return logp.max(dim=1).indices


@torch.inference_mode()
def greedy_search(decoder: Decoder, batch: SearchBatch, cfg: TranslateConfig) -> list[list[Hypothesis]]:
    """The beam = 1 fast path (argmax each step); equals beam_search with beam 1 and early_stop."""
    max_len, min_len = batch.lengths(cfg)
    rows = _decode_rows(decoder, decoder.start(batch.src), max_len, min_len, _argmax, batch, batch.prefixes)
    return _to_hypotheses(*rows, cfg.length_penalty, 1)


def _truncate(logits: Tensor, top_k: int, top_p: float) -> Tensor:
    """Keep the top_k tokens, then the smallest set whose probability reaches top_p (always the best)."""
    if 0 < top_k < logits.size(1):
        kth = logits.topk(top_k, dim=1).values[:, -1:]  # [N, 1]
        logits = logits.masked_fill(logits < kth, -math.inf)
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=1, descending=True)
        probs = sorted_logits.softmax(dim=1)
        drop = probs.cumsum(dim=1) - probs >= top_p  # the mass before this token already reaches top_p
        logits = logits.masked_fill(drop.scatter(1, order, drop), -math.inf)
    return logits


@torch.inference_mode()
def sample_search(decoder: Decoder, batch: SearchBatch, cfg: TranslateConfig) -> list[list[Hypothesis]]:
    """cfg.nbest samples per sentence (best first) from temperature-scaled, top-k/top-p truncated log-probs.

    Reproducible for the same batch and cfg.seed; one generator serves all rows, so unlike beam search
    the draws depend on the batch. Scores use the decoder's own log-probs, not the truncated ones.
    """
    per_sentence, src = cfg.nbest, batch.src
    max_len, min_len = batch.lengths(cfg)
    expand = torch.arange(src.size(0), device=src.device).repeat_interleave(per_sentence)
    state = decoder.reorder(decoder.start(src), expand)
    generator = torch.Generator(device=src.device).manual_seed(cfg.seed)

    def draw(logp: Tensor) -> Tensor:
        probs = _truncate(logp / cfg.temperature, cfg.top_k, cfg.top_p).softmax(dim=1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(1)

    prefixes = None if batch.prefixes is None else batch.prefixes[expand]
    rows = _decode_rows(decoder, state, max_len[expand], min_len[expand], draw, batch, prefixes)
    return _to_hypotheses(*rows, cfg.length_penalty, per_sentence)
