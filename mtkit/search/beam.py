"""Beam search, and `search`, which picks beam, greedy or seeded sampling per TranslateConfig; greedy and sampling
live in mtkit.search.sampling, the decoder contract and per-step rules in mtkit.search.step.
Scores by mtkit.search.config's rules. Imports torch and those modules only: never mtkit.model.transformer, IO or data.
Nothing that decides a sentence's output depends on the other rows of its batch or on padding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from mtkit.search.config import MIN_LENGTH, Hypothesis, TranslateConfig, length_penalty
from mtkit.search.sampling import greedy_search, sample_search
from mtkit.search.step import Decoder, SearchBatch, force_tokens, mask_logprobs, prefix_step
from mtkit.search.terms import TermGuide

# Shape letters: B sentences, b sentences still searching, K beam, N decoder rows, V vocab, L tokens.

# On CPU, log-probs are made and searched in chunks of whole sentences of at most this many rows: a step's logits
# written whole leave the caches before log-softmax, masking and top-k read them back (at V = 8,000 a chunk is
# 16 MiB); at 512 rows or fewer (one chunk) nothing changes. For larger vocabularies the chunk also bounds the
# logits' memory. On a GPU a step is one chunk: more chunks would only add kernel launches and host syncs.
LOGITS_CHUNK_ROWS = 512


def _after_prefix(
    cand: tuple[Tensor, Tensor, Tensor],
    first_free: Tensor,
    beam: int,
    *,
    pad_id: int,
    eos_id: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """CTranslate2's rule at the first step after a forced prefix (sentences `first_free` [b]), kept so that both
    engines agree: only the best candidate may end; an </s> ranked 2..K keeps its beam slot as a dead beam, and a
    candidate past the top K replaces only a best candidate that ended (CTranslate2 issue #277: short outputs)."""
    if not bool(first_free.any()):
        return cand
    score, origin, token = cand  # [b, 2K], best first
    rank = torch.arange(token.size(1), device=token.device)
    is_eos = token == eos_id
    dropped = first_free[:, None] & is_eos & (rank > 0) & (rank < beam)
    secondary = first_free[:, None] & (rank >= beam)
    usable = secondary & ~is_eos
    spare = usable & (usable.cumsum(dim=1) == 1) & is_eos[:, :1]  # the one that takes an ended best's place
    score = score.masked_fill(dropped | (secondary & ~spare), -math.inf)
    return score, origin, token.masked_fill(dropped, pad_id)


@dataclass
class _Finished:
    """Best K finished hypotheses of every sentence, best first; a -inf score marks an empty slot."""

    score: Tensor  # [B, K] normalized
    logprob: Tensor  # [B, K]
    length: Tensor  # [B, K] tokens without eos
    tokens: Tensor  # [B, K, L]
    attention: Tensor | None = None  # [B, K, L, S]: each token's alignment weights, when the search aligns

    @classmethod
    def empty(cls, n_sentences: int, beam: int, max_len: int, device: torch.device, sources: int = 0) -> _Finished:
        """`sources` > 0: room for each token's alignment weights over that many source positions."""
        score = torch.full((n_sentences, beam), -math.inf, device=device)
        length = torch.zeros((n_sentences, beam), dtype=torch.long, device=device)
        tokens = torch.zeros((n_sentences, beam, max_len), dtype=torch.long, device=device)
        attention = torch.zeros((n_sentences, beam, max_len, sources), device=device) if sources else None
        return cls(score, score.clone(), length, tokens, attention)

    def add(
        self, active: Tensor, score: Tensor, logprob: Tensor, tokens: Tensor, attention: Tensor | None = None
    ) -> None:
        """Merge new finished hypotheses [b, K] (-inf score: none) of sentences `active` [b]; `attention` [b, K, t, S]
        their tokens' alignment weights (kept where the search aligns)."""
        t = tokens.size(2)
        tokens = torch.nn.functional.pad(tokens, (0, self.tokens.size(2) - t))  # [b, K, L]
        all_score = torch.cat([self.score[active], score], dim=1)  # [b, 2K]
        # A stable sort keeps the earlier hypothesis first on exact ties, whatever the batch.
        keep = all_score.sort(dim=1, descending=True, stable=True).indices[:, : score.size(1)]  # [b, K]
        new_length = torch.full_like(score, t, dtype=torch.long)
        self.score[active] = all_score.gather(1, keep)
        self.logprob[active] = torch.cat([self.logprob[active], logprob], dim=1).gather(1, keep)
        self.length[active] = torch.cat([self.length[active], new_length], dim=1).gather(1, keep)
        all_tokens = torch.cat([self.tokens[active], tokens], dim=1)  # [b, 2K, L]
        self.tokens[active] = all_tokens.gather(1, keep[:, :, None].expand(-1, -1, all_tokens.size(2)))
        if self.attention is not None and attention is not None:
            # Every hypothesis finished so far has at most t tokens: only the first t rows are ever written.
            both = torch.cat([self.attention[active, :, :t], attention], dim=1)  # [b, 2K, t, S]
            picked = both.gather(1, keep[:, :, None, None].expand(-1, -1, *both.shape[2:]))
            self.attention[active, :, :t] = picked

    def hypotheses(self, nbest: int) -> list[list[Hypothesis]]:
        """Up to nbest hypotheses per sentence, best first."""
        score, logprob = self.score[:, :nbest].tolist(), self.logprob[:, :nbest].tolist()
        length, tokens = self.length[:, :nbest].tolist(), self.tokens[:, :nbest].tolist()
        attention = None if self.attention is None else self.attention[:, :nbest]
        return [
            [
                Hypothesis(
                    tokens[s][k][: length[s][k]],
                    score[s][k],
                    logprob[s][k],
                    None if attention is None else attention[s, k, : length[s][k]].tolist(),
                )
                for k in range(len(score[s]))
                if score[s][k] > -math.inf
            ]
            for s in range(len(score))
        ]


def _top_candidates(scores: Tensor, logp: Tensor, count: int) -> tuple[Tensor, Tensor, Tensor]:
    """The best `count` (2K) one-token extensions [b, count]: raw score, origin beam, token.

    2K so that K non-eos candidates remain even if K of them end in eos. Dead beams (-inf) only yield
    -inf candidates, so no hypothesis is ever duplicated; a tiny vocabulary's single step-0 row is padded
    with such dead candidates.
    """
    b, width, vocab = logp.shape
    cand = logp.add_(scores.unsqueeze(2)).view(b, width * vocab)  # [b, width*V], in logp: it is ours to write
    top, flat = _topk(cand, min(count, width * vocab))  # [b, count]
    if top.size(1) < count:
        top = torch.nn.functional.pad(top, (0, count - top.size(1)), value=-math.inf)
        flat = torch.nn.functional.pad(flat, (0, count - flat.size(1)))
    return top, flat // vocab, flat % vocab


def _candidates(
    decoder: Decoder,
    output: Any,
    scores: Tensor,
    count: int,
    forced: Tensor,
    *,
    pad_id: int,
    bos_id: int,
    eos_id: int,
    prefix: Tensor | None = None,
    early: Tensor | None = None,
    terms: TermGuide | None = None,
    t: int = 0,
) -> tuple[Tensor, Tensor, Tensor]:
    """_top_candidates of every sentence [b, count] from its rows' log-probs (scores [b, rows per sentence]),
    made and searched in equal chunks of whole sentences of at most LOGITS_CHUNK_ROWS rows on CPU; `prefix` [b]:
    each sentence's forced token (-1: none); `early` [b]: sentences that may not end yet (None: none); `terms`:
    the glossary terms each sentence's translation must hold (guided first, so that a forced end still ends)."""
    b, width = scores.shape
    n_chunks = -(-b * width // LOGITS_CHUNK_ROWS) if scores.device.type == "cpu" else 1
    per_chunk = max(-(-b // n_chunks), 1)
    parts = []
    for first in range(0, b, per_chunk):
        last = min(first + per_chunk, b)
        logp = decoder.log_probs(output, slice(first * width, last * width)).view(last - first, width, -1)
        if terms is not None:
            logp = terms.mask(logp, slice(first, last), eos_id, t)
        part = None if early is None else early[first:last]
        logp = mask_logprobs(logp, forced[first:last], pad_id=pad_id, bos_id=bos_id, eos_id=eos_id, early=part)
        logp = force_tokens(logp, None if prefix is None else prefix[first:last])
        parts.append(_top_candidates(scores[first:last], logp, count))
    return parts[0] if len(parts) == 1 else tuple(torch.cat(x) for x in zip(*parts))  # type: ignore[return-value]


def _topk(x: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """x.topk(k, dim=1) for beam search's wide rows [b, K*V], faster on CPU than torch.topk on such rows.

    The k largest values lie in the k blocks with the largest maxima (any other block's maximum is at
    most the k-th of those), so only those blocks are searched. Same values; among exactly equal values
    the index kept may differ from torch.topk's (which does not specify it either). Rows never mix.
    """
    n = x.size(1)
    block = next((size for size in range(128, 64, -1) if n % size == 0), 0)  # a block size that divides n
    if x.device.type != "cpu" or block == 0 or n // block < k:
        return x.topk(k, dim=1)
    b = x.size(0)
    blocks = x.view(b, n // block, block).amax(dim=2).topk(k, dim=1).indices  # [b, k]
    columns = (blocks[:, :, None] * block + torch.arange(block, device=x.device)).view(b, k * block)
    top, pick = x.gather(1, columns).topk(k, dim=1)  # [b, k]
    return top, columns.gather(1, pick)


def _finish_eos(
    finished: _Finished,
    active: Tensor,
    cand: tuple[Tensor, Tensor, Tensor],
    history: Tensor,
    alpha: float,
    eos_id: int,
    terms: TermGuide | None = None,
    attention: Tensor | None = None,
) -> None:
    """Set aside the eos candidates ranked within the top K (fairseq: lower ones were never in the beam). Guided
    by `terms`, a hypothesis ranks by its score with the terms' bonus and reports its log-prob without."""
    score, beam, token = (x[:, : history.size(1)] for x in cand)  # [b, K]
    is_eos = (token == eos_id) & torch.isfinite(score)
    if not bool(is_eos.any()):  # most steps: skip the merge
        return
    ranked = score.masked_fill(~is_eos, -math.inf)
    logprob = ranked if terms is None else ranked - terms.gained(beam)
    # |Y| counts the eos, as fairseq does: history holds t tokens, the hypothesis has t + 1.
    normalized = ranked / length_penalty(history.size(2) + 1, alpha)
    tokens = history.gather(1, beam[:, :, None].expand(-1, -1, history.size(2)))  # [b, K, t]
    weights = (
        None if attention is None else attention.gather(1, beam[:, :, None, None].expand(-1, -1, *attention.shape[2:]))
    )
    finished.add(active, normalized, logprob, tokens, weights)


def _continue_beams(cand: tuple[Tensor, Tensor, Tensor], beam: int, eos_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """The best K non-eos candidates become the next beams: raw score, origin beam, token [b, K]."""
    score, origin, token = cand
    score = score.masked_fill(token == eos_id, -math.inf)
    score, pick = score.sort(dim=1, descending=True, stable=True)  # stable: same tie order in any batch
    pick = pick[:, :beam]
    return score[:, :beam], origin.gather(1, pick), token.gather(1, pick)


def _sentences_done(
    finished_score: Tensor, scores: Tensor, t: int, max_len: Tensor, cfg: TranslateConfig, ahead: Tensor | None = None
) -> Tensor:
    """[b] bool: at max length, or (early_stop) K finished, or no live beam can enter the best K."""
    kth = finished_score[:, -1]  # [b] K-th best finished; -inf until K have finished
    best_live = scores.max(dim=1).values  # [b] raw log-prob <= 0, only decreases from here
    if cfg.early_stop:
        done = (kth > -math.inf) | (best_live == -math.inf)
        if ahead is not None and cfg.nbest == 1:
            # The best finished already beats what any live beam can still reach (its score, plus the bonuses
            # `ahead` of it, over the kindest length penalty): the first of K finished could only be that one.
            reach = scores + ahead  # [b, K]
            shortest = length_penalty(t + 2, cfg.length_penalty)
            longest = length_penalty(max_len + 1, cfg.length_penalty)[:, None]
            bound = torch.maximum(reach / shortest, reach / longest).max(dim=1).values
            done = done | (finished_score[:, 0] >= bound)
    else:
        # A live hypothesis (t + 1 tokens) ends with |Y| in [t + 2, max_len + 1]; lp is monotonic in |Y|,
        # so its normalized score is at most raw / the larger lp of the two ends (any sign of alpha).
        shortest = length_penalty(torch.full_like(max_len, t + 2), cfg.length_penalty)
        longest = length_penalty(max_len + 1, cfg.length_penalty)
        done = kth >= best_live / torch.maximum(shortest, longest)
    return done | (max_len <= t)


@torch.inference_mode()
def beam_search(
    decoder: Decoder, batch: SearchBatch, cfg: TranslateConfig, terms: TermGuide | None = None, align: bool = False
) -> list[list[Hypothesis]]:
    """Beam search over all sentences and beams at once; cfg.nbest hypotheses per sentence, best first.

    The batch's `prefixes`: tokens forced at the first steps; while a sentence's prefix lasts its one live beam
    extends it, and the search widens to K beams after it. `terms`: glossary terms each translation must hold
    (mtkit.search.terms). `align`: each hypothesis keeps its tokens' alignment weights (Decoder.weights), which
    decide nothing of the search.
    """
    src, prefixes, pad_id, bos_id, eos_id = batch.src, batch.prefixes, batch.pad_id, batch.bos_id, batch.eos_id
    n, beam, device = src.size(0), cfg.beam, src.device
    max_len, min_len = batch.lengths(cfg)  # [B], [B]
    prefix_len = None if prefixes is None else (prefixes >= 0).sum(dim=1)  # [B]
    # Step 0 decodes one row per sentence: its K beams would all be bos over the same source (a K-fold copy
    # of the first step's work, which has the most live sentences); the first reorder makes the K beams.
    state = decoder.start(src, True) if align else decoder.start(src)  # B rows
    sources = src.size(1) if align else 0
    attention = torch.zeros((n, beam, 0, sources), device=device) if align else None  # [b, K, t, S]
    active = torch.arange(n, device=device)  # [b] original index of each sentence still searching
    scores = torch.zeros((n, 1), device=device)  # [b, K] raw log-probs; [b, 1] at step 0
    history = torch.zeros((n, beam, 0), dtype=torch.long, device=device)  # [b, K, t]
    last = torch.full((n,), bos_id, dtype=torch.long, device=device)
    finished = _Finished.empty(n, beam, int(max_len.max()) if n else 0, device, sources)
    if terms is not None:
        terms.start(batch.src_lens)
    for t in range(int(max_len.max()) + 1 if n else 0):
        output = decoder.step(last, state)
        prefix = prefix_step(prefixes, active, t)
        forced = max_len[active] <= t
        early = min_len[active] > t if t < MIN_LENGTH else None
        cand = _candidates(
            decoder,
            output,
            scores,
            2 * beam,
            forced,
            pad_id=pad_id,
            bos_id=bos_id,
            eos_id=eos_id,
            prefix=prefix,
            early=early,
            terms=terms,
            t=t,
        )
        if prefix_len is not None:
            cand = _after_prefix(cand, (prefix_len[active] == t) & (t > 0), beam, pad_id=pad_id, eos_id=eos_id)
        _finish_eos(finished, active, cand, history, cfg.length_penalty, eos_id, terms, attention)
        scores, origin, token = _continue_beams(cand, beam, eos_id)
        if terms is not None:
            terms.advance(origin, token)
        history = torch.cat([history.gather(1, origin[:, :, None].expand(-1, -1, t)), token[:, :, None]], dim=2)
        if attention is not None:  # the step's weights of each new beam's origin row: the row that wrote its token
            step = decoder.weights(state).view(len(active), -1, sources)  # [b, rows per sentence, S]
            kept = attention.gather(1, origin[:, :, None, None].expand(-1, -1, t, sources))
            attention = torch.cat([kept, step.gather(1, origin[:, :, None].expand(-1, -1, sources))[:, :, None]], dim=2)
        ahead = None if terms is None else terms.ahead()
        keep = (~_sentences_done(finished.score[active], scores, t, max_len[active], cfg, ahead)).nonzero().squeeze(1)
        if len(keep) == 0:
            break
        if terms is not None:
            terms.keep(keep)
        # One reorder per step: pick each kept sentence's chosen origin beams; finished sentences go. After
        # step 0 every beam's origin is its sentence's single row.
        rows = (keep[:, None] * beam + origin[keep]).view(-1) if t else keep.repeat_interleave(beam)
        state = decoder.reorder(state, rows)
        active, scores, history, last = active[keep], scores[keep], history[keep], token[keep].view(-1)
        if attention is not None:
            attention = attention[keep]
    return finished.hypotheses(cfg.nbest)


def search(
    decoder: Decoder, batch: SearchBatch, cfg: TranslateConfig, terms: TermGuide | None = None, align: bool = False
) -> list[list[Hypothesis]]:
    """Translate one batch: sampling, greedy (beam 1 with early_stop) or beam search, per cfg; the batch's
    `prefixes`: tokens each translation must begin with; `terms`: glossary terms each must hold, which only beam
    search honours (a greedy search guided is beam search of 1); `align`: each hypothesis keeps its alignment
    weights, which only beam search keeps (sampling's hypotheses come without)."""
    if cfg.sampling:
        return sample_search(decoder, batch, cfg)
    if terms is not None or align or cfg.beam > 1 or not cfg.early_stop:
        return beam_search(decoder, batch, cfg, terms, align)
    return greedy_search(decoder, batch, cfg)
