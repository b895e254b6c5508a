"""The decoder's key/value cache between decoding steps: per-layer caches, the state search carries, growth,
and reordering rows by beam origin (fairseq's reorder_incremental_state). mtkit.model.transformer fills it.
Imports torch only.
"""

# Shape letters: S source length, D d_model, H n_heads, N decoding rows (sentences x beams),
# M stored source entries (N / group), t tokens decoded so far.

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class LayerCache:
    """One decoder layer's keys/values: self-attention [N, H, capacity, D/H] of which the first t
    positions are filled, cross-attention [N, H, S, D/H]."""

    keys: Tensor
    values: Tensor
    cross_keys: Tensor
    cross_values: Tensor


@dataclass
class DecodeState:
    """Everything decode_step needs between steps.

    Rows come in groups of `group` consecutive rows with the same source sentence (a sentence's beams),
    and the source side (memory_mask, the cross keys/values) is stored once per group: M = N / group
    entries. A beam step then attends with all K queries of a sentence at once, and reordering beams
    within their sentences copies nothing on the source side.
    """

    memory_mask: Tensor  # [M, 1, 1, S] bool, True = attend
    layers: list[LayerCache]
    group: int = 1
    position: int = 0
    # Whether each step keeps its alignment layer's cross-attention (mtkit.model.alignment), and the last step's
    # [N, S]: a glossary's "replace" way reads the output's alignment from the search instead of a second pass.
    align: bool = False
    weights: Tensor | None = None


def reorder_state(state: DecodeState, order: Tensor) -> DecodeState:
    """Row n of the result is row order[n] of state: beam reordering, expansion, dropping rows."""
    entries, group = _source_entries(order // state.group, state.memory_mask.shape[0])

    def pick(tensor: Tensor) -> Tensor:  # source side: one entry per group
        return tensor if entries is None else tensor.index_select(0, entries)

    def pick_filled(cache: Tensor) -> Tensor:  # copies only the t filled positions
        # Room for exactly the next position: the copy is made anyway, so growing here is free, and
        # the caches take no more memory than they hold (doubling kept up to twice that).
        t = state.position
        picked = cache.new_empty((len(order), cache.shape[1], t + 1, cache.shape[3]))
        torch.index_select(cache[:, :, :t], 0, order, out=picked[:, :, :t])
        return picked

    layers = [
        LayerCache(pick_filled(c.keys), pick_filled(c.values), pick(c.cross_keys), pick(c.cross_values))
        for c in state.layers
    ]
    return DecodeState(pick(state.memory_mask), layers, group, state.position, state.align)


def _source_entries(source: Tensor, n_entries: int) -> tuple[Tensor | None, int]:
    """Source entries to keep and the new group size, given each new row's source entry [N'].

    Rows in equal runs (u0 x g, u1 x g, ...) keep one entry per run: None when that is every entry in
    order (nothing to copy, the usual beam step). Any other order gets one entry per row (group 1).
    """
    runs = torch.unique_consecutive(source)  # [M']
    group = len(source) // len(runs) if len(runs) else 1
    if len(runs) and torch.equal(source, runs.repeat_interleave(group)):
        if len(runs) == n_entries and torch.equal(runs, torch.arange(n_entries, device=runs.device)):
            return None, group
        return runs, group
    return source, 1


def grow(state: DecodeState) -> None:
    """Double the self-attention caches: amortised O(1) appends instead of a full copy per step."""
    for cache in state.layers:
        cache.keys = torch.cat([cache.keys, torch.empty_like(cache.keys)], dim=2)
        cache.values = torch.cat([cache.values, torch.empty_like(cache.values)], dim=2)
