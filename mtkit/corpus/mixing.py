"""How an epoch draws from several training corpora: each corpus's count from weights, or from a temperature over
language pairs; the draw (whole repeats plus a subset without replacement), which mtkit.corpus.batching cuts into
that epoch's batches. Pure functions of (sizes, weights, seed, epoch), so a resumed run redraws the same epoch from
its checkpoint's epoch and position. numpy only (mtkit.errors for the weights' one-line errors); one corpus is never
resampled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mtkit.errors import check

SAMPLINGS = ("weights", "temperature")
MIX_STREAM = 0x6D6978  # "mix": the draw's generator is [seed, epoch, MIX_STREAM], apart from batching's [seed, epoch]


@dataclass
class Mixture:
    """What one epoch draws: corpus i (sentences starts[i]:starts[i] + sizes[i] of the concatenated data) gives
    counts[i] pairs."""

    names: list[str]
    sizes: np.ndarray
    counts: np.ndarray

    def draw(self, seed: int, epoch: int) -> np.ndarray:
        return draw_epoch(self.sizes, self.counts, seed, epoch)


def epoch_counts(
    sizes: Sequence[int],
    weights: Sequence[float],
    pairs: Sequence[str],
    sampling: str = "weights",
    temperature: float = 1.0,
) -> np.ndarray:
    """Pairs each corpus gives to one epoch of E = sum(sizes) pairs (np.rint: half to even).

    "weights": c_i = rint(E * w_i / sum w). "temperature": language pair p gets q_p = (n_p / E)^(1/T), normalized,
    and c_p = rint(E * q_p), split among its corpora by weight: c_i = rint(c_p * w_i / sum of its w). An empty corpus
    gets 0 and takes no share.
    """
    sizes, weights = np.asarray(sizes, np.int64), np.asarray(weights, np.float64)
    total = int(sizes.sum())
    share = np.where(sizes > 0, weights, 0.0)
    if total == 0:
        return np.zeros(len(sizes), np.int64)
    if sampling == "weights":
        return np.rint(total * share / share.sum()).astype(np.int64)
    pair_of = np.array(pairs)
    names = list(dict.fromkeys(pairs))
    pair_sizes = np.array([sizes[pair_of == name].sum() for name in names], np.float64)
    q = (pair_sizes / total) ** (1.0 / temperature)
    pair_counts = np.rint(total * q / q.sum())
    counts = np.zeros(len(sizes), np.int64)
    for name, count in zip(names, pair_counts):
        members = pair_of == name
        if share[members].sum() > 0:
            counts[members] = np.rint(count * share[members] / share[members].sum())
    return counts


def draw_epoch(sizes: np.ndarray, counts: np.ndarray, seed: int, epoch: int) -> np.ndarray:
    """Indices into the concatenated corpora: corpus i's pairs floor(c/n) times each, then a random c mod n of them
    without replacement (c < n: a subsample). The same for the same (sizes, counts, seed, epoch)."""
    rng = np.random.default_rng([seed, epoch, MIX_STREAM])
    starts = np.cumsum(sizes) - sizes
    drawn = []
    for start, size, count in zip(starts.tolist(), sizes.tolist(), counts.tolist()):
        if count == 0 or size == 0:
            continue
        repeats, rest = divmod(count, size)
        drawn.append(start + np.tile(np.arange(size, dtype=np.int64), repeats))
        drawn.append(start + np.sort(rng.choice(size, rest, replace=False)))
    return np.concatenate(drawn) if drawn else np.zeros(0, np.int64)


def epoch_draw(mixture: Mixture | None, seed: int, epoch: int) -> np.ndarray | None:
    """The indices into the data that epoch `epoch` draws, for mtkit.corpus.batching.epoch_batches' `drawn`; None
    without a mixture, whose epoch takes every sentence once, exactly as without mixing."""
    return None if mixture is None else mixture.draw(seed, epoch)


def resolve_weights(
    corpora: dict[str, dict], recipe_corpora: list[dict[str, Any]] | None, overrides: dict[str, Any]
) -> dict[str, float]:
    """Corpus -> weight: the manifest's, then the recipe's [[preprocess.corpora]] (so that editing the recipe needs no
    new preprocess), then train.corpus_weights. An unknown corpus or a weight that is not positive is refused."""
    weights = {name: float(entry.get("weight", 1.0)) for name, entry in corpora.items()}
    recipe = {corpus.get("name"): corpus.get("weight", 1.0) for corpus in recipe_corpora or []}
    for where, given in (("the recipe's [[preprocess.corpora]]", recipe), ("train.corpus_weights", overrides)):
        for name, weight in given.items():
            check(name in weights, f"{where}: no corpus {name!r} in the data (its corpora: {', '.join(weights)})")
            check(
                isinstance(weight, (int, float)) and not isinstance(weight, bool) and weight > 0,
                f"corpus {name}: weight must be positive, got {weight!r} ({where})",
            )
            weights[name] = float(weight)
    return weights


def plan_mixture(
    corpora: dict[str, dict], weights: dict[str, float], sampling: str, temperature: float
) -> Mixture | None:
    """The mixture of the manifest's corpora (in their order); None for a single corpus, which is never resampled."""
    if len(corpora) < 2:
        return None
    names = list(corpora)
    sizes = np.array([corpora[name]["pairs"] for name in names], np.int64)
    pairs = [f"{corpora[name]['source_lang']}-{corpora[name]['target_lang']}" for name in names]
    counts = epoch_counts(sizes, [weights[name] for name in names], pairs, sampling, temperature)
    return Mixture(names, sizes, counts)
