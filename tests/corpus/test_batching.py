"""Batching: a partition within budget, seeded, resumable, sharded; hand-computed packing and padding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mtkit.corpus.batching import epoch_batches, make_batches, shard_batches
from mtkit.corpus.binarized import ParallelData


def padding_efficiency(batches: list[np.ndarray], src_lens: np.ndarray, tgt_lens: np.ndarray) -> float:
    """Non-pad / total entries of the padded src and tgt tensors (each padded to its batch maximum)."""
    batches = [batch for batch in batches if len(batch)]
    if not batches:
        return 1.0
    flat = np.concatenate(batches)
    sizes = np.array([len(batch) for batch in batches], dtype=np.int64)
    starts = np.cumsum(sizes) - sizes
    real = 0
    total = 0
    for lens in (src_lens, tgt_lens):
        widths = np.asarray(lens, dtype=np.int64)[flat] + 1  # eos on src; bos or eos on tgt
        real += int(widths.sum())
        total += int((np.maximum.reduceat(widths, starts) * sizes).sum())
    return real / total


@pytest.fixture(scope="module")
def lens() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    src = rng.integers(1, 60, 5000)
    tgt = np.clip(src + rng.integers(-8, 9, 5000), 1, None)
    return src, tgt


def cost(batch: np.ndarray, src: np.ndarray, tgt: np.ndarray) -> int:
    return len(batch) * int(max(src[batch].max(), tgt[batch].max()) + 1)


def test_every_sentence_once_and_budget_kept(lens: tuple[np.ndarray, np.ndarray]) -> None:
    src, tgt = lens
    for max_tokens in (68, 500, 4096):  # 68: the widest sentence alone
        batches = make_batches(src, tgt, max_tokens, seed=1, epoch=0)
        assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(len(src)))
        assert all(cost(batch, src, tgt) <= max_tokens for batch in batches)


def test_max_sentences(lens: tuple[np.ndarray, np.ndarray]) -> None:
    src, tgt = lens
    batches = make_batches(src, tgt, 4096, seed=1, epoch=0, max_sentences=7)
    assert max(len(batch) for batch in batches) == 7
    assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(len(src)))


def test_hand_computed_packing() -> None:
    # Width 3 + 1 = 4 each: two fit in 10 tokens (8), three do not (12).
    batches = make_batches(np.full(5, 3), np.full(5, 2), max_tokens=10, seed=0, epoch=0)
    assert sorted(len(batch) for batch in batches) == [1, 2, 2]
    # The padded width counts, not the sum of lengths: 1 + 7 makes both cost 8 each.
    batches = make_batches(np.array([1, 7]), np.array([1, 1]), max_tokens=15, seed=0, epoch=0)
    assert sorted(len(batch) for batch in batches) == [1, 1]


def test_seeded_and_epoch_dependent(lens: tuple[np.ndarray, np.ndarray]) -> None:
    src, tgt = lens
    first = make_batches(src, tgt, 1000, seed=5, epoch=2)
    again = make_batches(src, tgt, 1000, seed=5, epoch=2)
    other_epoch = make_batches(src, tgt, 1000, seed=5, epoch=3)
    assert all(np.array_equal(a, b) for a, b in zip(first, again)) and len(first) == len(again)
    assert [a.tolist() for a in first] != [b.tolist() for b in other_epoch]
    assert np.array_equal(np.sort(np.concatenate(other_epoch)), np.arange(len(src)))


def test_resume_gives_the_remaining_batches(lens: tuple[np.ndarray, np.ndarray]) -> None:
    src, tgt = lens
    full = epoch_batches(src, tgt, 800, seed=1, epoch=4, rank=1, world_size=3)
    position = len(full) // 2
    resumed = epoch_batches(src, tgt, 800, seed=1, epoch=4, rank=1, world_size=3)[position:]
    assert [b.tolist() for b in resumed] == [b.tolist() for b in full[position:]]


@pytest.mark.parametrize("world_size", [1, 2, 3, 7])
def test_shards_are_disjoint_and_equal(lens: tuple[np.ndarray, np.ndarray], world_size: int) -> None:
    src, tgt = lens
    batches = make_batches(src, tgt, 700, seed=1, epoch=0)
    shards = [epoch_batches(src, tgt, 700, seed=1, epoch=0, rank=r, world_size=world_size) for r in range(world_size)]
    assert len({len(shard) for shard in shards}) == 1
    assert len(batches) - world_size < world_size * len(shards[0]) <= len(batches)
    seen = np.concatenate([np.concatenate(shard) for shard in shards])
    assert len(np.unique(seen)) == len(seen)


def test_shard_of_too_few_batches_is_empty_everywhere() -> None:
    batches = [np.array([0]), np.array([1])]
    assert [shard_batches(batches, r, 3) for r in range(3)] == [[], [], []]
    with pytest.raises(ValueError):
        shard_batches(batches, 3, 3)


def test_oversized_sentence_is_an_error() -> None:
    with pytest.raises(ValueError, match="max_tokens=10"):
        make_batches(np.array([3, 10]), np.array([3, 2]), max_tokens=10, seed=0, epoch=0)
    with pytest.raises(ValueError):
        make_batches(np.array([1]), np.array([1]), max_tokens=0, seed=0, epoch=0)


def test_empty_input_and_empty_sentences() -> None:
    assert make_batches(np.array([], dtype=int), np.array([], dtype=int), 100, seed=0, epoch=0) == []
    batches = make_batches(np.zeros(10, dtype=int), np.zeros(10, dtype=int), 4, seed=0, epoch=0)
    assert sorted(len(batch) for batch in batches) == [2, 4, 4]


def test_padding_efficiency_hand_computed() -> None:
    src, tgt = np.array([1, 3, 2]), np.array([2, 2, 5])
    # src widths (2, 4 | 3), tgt widths (3, 3 | 6): real 9 + 12, padded 2*4 + 3 + 2*3 + 6.
    assert padding_efficiency([np.array([0, 1]), np.array([2])], src, tgt) == pytest.approx(21 / 23)
    assert padding_efficiency([], src, tgt) == 1.0


def test_padding_efficiency_on_multi30k(multi30k_data: Path) -> None:
    data = ParallelData.open(multi30k_data, "train", "en", "de")
    batches = epoch_batches(data.src_lens, data.tgt_lens, 4096, seed=1, epoch=0)
    assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(len(data)))
    assert padding_efficiency(batches, data.src_lens, data.tgt_lens) >= 0.9


def test_an_epochs_distinct_shapes_are_bounded(multi30k_data: Path) -> None:
    """With lengths rounded up to 8, an epoch of Multi30k at 4,096 tokens has a few dozen (B, S, T) shapes where
    unrounded batches have one shape each (measured: 45 against 211), and the budget holds for the padded
    tensors."""
    from mtkit.corpus.binarized import collate

    data = ParallelData.open(multi30k_data, "train", "en", "de")
    counts = {}
    for multiple in (1, 8):
        batches = epoch_batches(data.src_lens, data.tgt_lens, 4096, seed=1, epoch=1, pad_multiple=multiple)
        shapes = set()
        for idx in batches:
            batch = collate(data, idx, pad_multiple=multiple)
            (b, s), t = batch.src.shape, batch.tgt_in.shape[1]
            assert s % multiple == t % multiple == 0 and b * max(s, t) <= 4096
            shapes.add((b, s, t))
        counts[multiple] = len(shapes), len(batches)
    assert counts[1][0] > 0.9 * counts[1][1]  # unrounded: nearly a new shape per batch
    assert counts[8][0] <= 60 and counts[8][1] < 1.2 * counts[1][1], counts
