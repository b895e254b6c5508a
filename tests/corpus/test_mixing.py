"""Sampling from several corpora: counts by weight and by temperature computed by hand, exact by construction; the
draw repeats every pair floor(c/n) times and adds a subset without replacement; seeded per (seed, epoch); one corpus
is batched exactly as without mixing; weights from the manifest, the recipe and train.corpus_weights."""

from __future__ import annotations

import numpy as np
import pytest

from mtkit.corpus.batching import epoch_batches
from mtkit.corpus.mixing import Mixture, draw_epoch, epoch_counts, epoch_draw, plan_mixture, resolve_weights
from mtkit.errors import UserError


def test_weights_by_hand() -> None:
    # E = 130; the empty corpus takes no share: 130 * 1/3 = 43.3 -> 43, 130 * 2/3 = 86.7 -> 87.
    assert epoch_counts([100, 30, 0], [1.0, 2.0, 5.0], ["en-de"] * 3).tolist() == [43, 87, 0]
    # Equal weights over unequal corpora: each gets half of the epoch, the small one upsampled 9x.
    assert epoch_counts([900, 100], [1.0, 1.0], ["en-de", "en-fr"]).tolist() == [500, 500]
    assert epoch_counts([0, 0], [1.0, 1.0], ["en-de", "en-fr"]).tolist() == [0, 0]


def test_temperature_by_hand() -> None:
    sizes, pairs = [900, 100], ["en-de", "en-fr"]
    assert epoch_counts(sizes, [1.0, 1.0], pairs, "temperature", 1.0).tolist() == [900, 100]  # proportional
    # T = 2: q ~ sqrt(0.9) : sqrt(0.1) = 3 : 1.
    assert epoch_counts(sizes, [1.0, 1.0], pairs, "temperature", 2.0).tolist() == [750, 250]
    assert epoch_counts(sizes, [1.0, 1.0], pairs, "temperature", 1e9).tolist() == [500, 500]  # flat
    # A pair's share is split among its corpora by weight: en-de's 750 as 1:3 (187.5 -> 188, 562.5 -> 562, half to
    # even); weights do not move a share from one pair to another.
    three = epoch_counts([600, 300, 100], [1.0, 3.0, 50.0], ["en-de", "en-de", "en-fr"], "temperature", 2.0)
    assert three.tolist() == [188, 562, 250]


@pytest.mark.parametrize("counts", [[0, 7, 1000], [25, 35, 3], [50, 10, 150]])
def test_a_draw_gives_each_corpus_its_count(counts: list[int]) -> None:
    sizes = np.array([50, 10, 300])
    drawn = draw_epoch(sizes, np.array(counts), seed=3, epoch=2)
    corpus = np.searchsorted(np.cumsum(sizes), drawn, side="right")
    assert np.bincount(corpus, minlength=3).tolist() == counts  # exact, not within a tolerance
    starts = np.cumsum(sizes) - sizes
    for k, (size, count) in enumerate(zip(sizes, counts)):
        times = np.bincount(drawn[corpus == k] - starts[k], minlength=size)
        # Upsampled: every pair count // size times, count % size of them once more; subsampled: none twice.
        assert set(times.tolist()) <= {count // size, count // size + 1}
        assert int((times > count // size).sum()) == count % size


def test_same_seed_same_batches_other_seed_or_epoch_other_batches() -> None:
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, 30, 500), rng.integers(1, 30, 500)
    mixture = Mixture(["a", "b"], np.array([400, 100]), np.array([250, 250]))

    def batches(seed: int, epoch: int) -> list[list[int]]:
        return [batch.tolist() for batch in epoch_batches(src, tgt, 256, seed, epoch, drawn=mixture.draw(seed, epoch))]

    assert batches(1, 1) == batches(1, 1)
    assert batches(1, 1) != batches(2, 1) and batches(1, 1) != batches(1, 2)
    drawn = np.sort(np.concatenate(epoch_batches(src, tgt, 256, 1, 1, drawn=mixture.draw(1, 1))))
    assert drawn.tolist() == np.sort(mixture.draw(1, 1)).tolist()  # the batches hold the draw, each drawn pair once
    for batch in epoch_batches(src, tgt, 256, 1, 1, drawn=mixture.draw(1, 1)):
        assert len(batch) * (max(src[batch].max(), tgt[batch].max()) + 1) <= 256
    # Resuming at position p of the epoch is the list from p; ranks share it out as without mixing.
    whole = epoch_batches(src, tgt, 256, 1, 1, drawn=mixture.draw(1, 1))
    shards = [epoch_batches(src, tgt, 256, 1, 1, rank, 2, drawn=mixture.draw(1, 1)) for rank in (0, 1)]
    assert [b.tolist() for b in shards[0]] == [b.tolist() for b in whole[0 : 2 * len(shards[0]) : 2]]


def test_without_a_mixture_the_batches_are_batchings_own() -> None:
    rng = np.random.default_rng(1)
    src, tgt = rng.integers(1, 40, 300), rng.integers(1, 40, 300)
    assert epoch_draw(None, 5, 3) is None
    # A draw of every sentence once, in order, batches the data exactly as no draw does.
    ours = epoch_batches(src, tgt, 300, 5, 3, 1, 2, pad_multiple=8, drawn=np.arange(300))
    theirs = epoch_batches(src, tgt, 300, 5, 3, 1, 2, pad_multiple=8)
    assert [b.tolist() for b in ours] == [b.tolist() for b in theirs]


CORPORA = {
    "de": {"pairs": 900, "source_lang": "en", "target_lang": "de", "weight": 1.0},
    "fr": {"pairs": 100, "source_lang": "en", "target_lang": "fr", "weight": 2.0},
}


def test_weights_come_from_the_manifest_then_the_recipe_then_train_corpus_weights() -> None:
    assert resolve_weights(CORPORA, None, {}) == {"de": 1.0, "fr": 2.0}
    recipe = [{"name": "de", "train": "x", "weight": 3}, {"name": "fr", "train": "y"}]  # fr: the default, 1
    assert resolve_weights(CORPORA, recipe, {}) == {"de": 3.0, "fr": 1.0}
    assert resolve_weights(CORPORA, recipe, {"fr": 0.5}) == {"de": 3.0, "fr": 0.5}
    with pytest.raises(UserError, match=r"^train.corpus_weights: no corpus 'es' in the data \(its corpora: de, fr\)$"):
        resolve_weights(CORPORA, None, {"es": 1.0})
    with pytest.raises(UserError, match=r"^the recipe's \[\[preprocess.corpora\]\]: no corpus 'cs'"):
        resolve_weights(CORPORA, [{"name": "cs", "weight": 1.0}], {})
    for bad in (0, -1.0, "2", True):
        with pytest.raises(UserError, match=r"^corpus fr: weight must be positive, got .* \(train.corpus_weights\)$"):
            resolve_weights(CORPORA, None, {"fr": bad})


def test_one_corpus_is_not_mixed() -> None:
    assert plan_mixture({"train": CORPORA["de"]}, {"train": 1.0}, "weights", 1.0) is None
    mixture = plan_mixture(CORPORA, {"de": 1.0, "fr": 2.0}, "weights", 1.0)
    assert mixture is not None and mixture.names == ["de", "fr"] and mixture.counts.tolist() == [333, 667]
    mixture = plan_mixture(CORPORA, {"de": 1.0, "fr": 2.0}, "temperature", 2.0)
    assert mixture is not None and mixture.counts.tolist() == [750, 250]
