"""What every decoding engine shares, in plain Python: TranslateConfig, Hypothesis, the GNMT length penalty and
the per-sentence minimum and maximum output lengths.

Imports no torch: mtkit.search.beam (the torch engine) and mtkit.engines.ct2 (CTranslate2) both score by these rules,
so a path that decodes with CTranslate2 starts without torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from mtkit.errors import check


@dataclass
class TranslateConfig:
    """How to search: each field is a [translate] recipe key, and where `mtkit translate` has the option, its
    default and help come from here (metadata "help")."""

    beam: int = field(default=4, metadata={"help": "Beam size (1 = greedy)."})
    length_penalty: float = field(
        default=0.6, metadata={"help": "GNMT length penalty alpha: score = logprob / ((5 + |Y|) / 6) ** alpha."}
    )
    max_len_a: float = field(
        default=1.0, metadata={"help": "Max output length = floor(a * source length + b), per sentence."}
    )
    max_len_b: int = field(default=50, metadata={"help": "The b of max output length = floor(a * source length + b)."})
    nbest: int = field(
        default=1,
        metadata={
            "help": "Hypotheses per input (at most the beam; samples when sampling), "
            "printed as INDEX<TAB>K<TAB>SCORE<TAB>TEXT."
        },
    )
    early_stop: bool = field(  # as fairseq and CTranslate2
        default=True, metadata={"help": "Stop a sentence once it has `beam` finished hypotheses."}
    )
    sampling: bool = field(default=False, metadata={"help": "Sample instead of beam search (back-translation)."})
    top_k: int = field(default=0, metadata={"help": "Sample from the k likeliest tokens only (0: all)."})
    top_p: float = field(
        default=1.0, metadata={"help": "Sample from the smallest set of tokens whose probability reaches p (1.0: all)."}
    )
    temperature: float = field(default=1.0, metadata={"help": "Divide the logits by this before sampling."})
    seed: int = field(default=1, metadata={"help": "Random seed of sampling."})
    batch_tokens: int = field(  # used by the engines' batching, not by search
        default=4000, metadata={"help": "Source tokens per batch."}
    )
    workers: int = field(  # used by the engines, not by search
        default=1, metadata={"help": "Batches decoded at once on CPU, each on its share of the threads."}
    )
    target_lang: str | None = field(  # used by the engines' encoding (mtkit.engines.contract), not by search
        default=None,
        metadata={
            "help": "The language a multilingual model translates into (one of its >>xx<< "
            "codes, e.g. fr; a model of one code uses it). A line may instead begin "
            "with its own code, as >>fr<< for opus-mt models."
        },
    )

    def __post_init__(self) -> None:
        for name in ("beam", "nbest", "batch_tokens", "workers"):
            check(getattr(self, name) >= 1, f"translate.{name} must be at least 1; got {getattr(self, name)}")
        check(
            self.sampling or self.nbest <= self.beam,
            f"translate.nbest ({self.nbest}) must not exceed translate.beam ({self.beam})",
        )
        for name in ("max_len_a", "max_len_b", "top_k"):
            check(getattr(self, name) >= 0, f"translate.{name} must be >= 0; got {getattr(self, name)}")
        check(0.0 < self.top_p <= 1.0, f"translate.top_p must be in (0, 1]; got {self.top_p}")
        check(self.temperature > 0.0, f"translate.temperature must be > 0; got {self.temperature}")


@dataclass(frozen=True)
class SearchOverrides:
    """TranslateConfig fields set over a run's recipe (the [translate] its model carries) when the model loads: a field
    left None keeps the recipe's value; a field named in `reset` takes TranslateConfig's default whatever the recipe
    says. One field per TranslateConfig field, in its order (tests/search/test_config.py holds them alike)."""

    beam: int | None = None
    length_penalty: float | None = None
    max_len_a: float | None = None
    max_len_b: int | None = None
    nbest: int | None = None
    early_stop: bool | None = None
    sampling: bool | None = None
    top_k: int | None = None
    top_p: float | None = None
    temperature: float | None = None
    seed: int | None = None
    batch_tokens: int | None = None
    workers: int | None = None
    target_lang: str | None = None
    reset: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = {f.name for f in fields(TranslateConfig)}
        unknown = [name for name in self.reset if name not in names]
        check(not unknown, f"translate options: no such field {', '.join(unknown)}")

    def changes(self) -> dict[str, Any]:
        """The TranslateConfig fields to replace in the recipe's, with their values."""
        changed = {f.name: f.default for f in fields(TranslateConfig) if f.name in self.reset}
        for f in fields(TranslateConfig):
            if getattr(self, f.name) is not None:
                changed[f.name] = getattr(self, f.name)
        return changed


@dataclass
class Hypothesis:
    tokens: list[int]  # without bos and eos; a forced target prefix included
    score: float  # logprob / length_penalty(len(tokens) + 1, alpha)
    logprob: float  # sum of the decoder's log-probs, eos included
    # Per token, its alignment weights over the source's ids (eos and padding left out), kept by a search asked to
    # align (mtkit.model.alignment's layer); None otherwise.
    attention: list[list[float]] | None = None


def length_penalty(length: Any, alpha: float) -> Any:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, eq. 14); 1 for alpha = 0.

    |Y| counts the eos, as fairseq does. Plain arithmetic: works on an int or a tensor of lengths.
    """
    return ((5 + length) / 6) ** alpha


# Fewest output tokens (eos excluded) of a non-empty source: an end of sentence may not win the first step (fairseq's
# --min-len 1, CTranslate2's min_decoding_length 1), so no non-empty source gets an empty translation. The rule only
# takes the empty hypothesis out of the finished ones: the beams kept and every other hypothesis' score are as
# before, so a translation that was not empty changes only where an empty one had been among the beam's finished.
MIN_LENGTH = 1


def min_length(src_len: int, max_len: int) -> int:
    """Fewest output tokens (eos excluded) of one sentence: MIN_LENGTH for a non-empty source, never over its
    maximum length (at 0, the forced </s> wins); none for an empty one."""
    return min(MIN_LENGTH, max_len) if src_len > 0 else 0


def max_length(src_len: int, a: float, b: int, max_positions: int | None = None) -> int:
    """Most output tokens (eos excluded) of one sentence: floor(a * src_len + b), clipped to the decoder.

    src_len counts the source's own tokens (no eos). The decoder sees bos + tokens and predicts eos at position
    max_len, so max_len <= max_positions - 1. The same float64 arithmetic as mtkit.search.beam.max_lengths.
    """
    length = max(math.floor(a * src_len + b), 0)
    return length if max_positions is None else min(length, max_positions - 1)
