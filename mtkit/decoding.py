"""What every decoding engine shares, in plain Python: TranslateConfig, Hypothesis, the GNMT length penalty and
the per-sentence maximum output length.

Imports no torch: mtkit.search (the torch engine) and mtkit.ct2engine (CTranslate2) both score by these rules,
so a path that decodes with CTranslate2 starts without torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass
class TranslateConfig:
    beam: int = 4
    length_penalty: float = 0.6  # GNMT alpha: score = logprob / ((5 + |Y|) / 6) ** alpha
    max_len_a: float = 1.0  # max output tokens = floor(a * src_len + b), per sentence
    max_len_b: int = 50
    nbest: int = 1  # hypotheses returned per sentence (<= beam); samples per sentence when sampling
    early_stop: bool = True  # stop a sentence at `beam` finished hypotheses (fairseq, CTranslate2)
    sampling: bool = False
    top_k: int = 0  # 0: no top-k truncation
    top_p: float = 1.0  # 1.0: no nucleus truncation
    temperature: float = 1.0
    seed: int = 1
    batch_tokens: int = 4000  # source tokens per batch; used by translate.py, not by search
    workers: int = 1  # batches decoded at once on CPU, each on its share of the threads; used by translate.py

    def __post_init__(self) -> None:
        for name in ("beam", "nbest", "batch_tokens", "workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1; got {getattr(self, name)}")
        if not self.sampling and self.nbest > self.beam:
            raise ValueError(f"nbest ({self.nbest}) must not exceed beam ({self.beam})")
        if self.max_len_a < 0 or self.max_len_b < 0:
            raise ValueError(f"max_len_a and max_len_b must be >= 0; got {self.max_len_a}, {self.max_len_b}")
        if self.top_k < 0 or not 0.0 < self.top_p <= 1.0 or not self.temperature > 0.0:
            raise ValueError(
                f"need top_k >= 0, 0 < top_p <= 1, temperature > 0; got {self.top_k}, {self.top_p}, {self.temperature}"
            )


@dataclass
class Hypothesis:
    tokens: list[int]  # without bos and eos; a forced target prefix included
    score: float  # logprob / length_penalty(len(tokens) + 1, alpha)
    logprob: float  # sum of the decoder's log-probs, eos included


def length_penalty(length: Any, alpha: float) -> Any:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, eq. 14); 1 for alpha = 0.

    |Y| counts the eos, as fairseq does. Plain arithmetic: works on an int or a tensor of lengths.
    """
    return ((5 + length) / 6) ** alpha


def max_length(src_len: int, a: float, b: int, max_positions: int | None = None) -> int:
    """Most output tokens (eos excluded) of one sentence: floor(a * src_len + b), clipped to the decoder.

    src_len counts the source's own tokens (no eos). The decoder sees bos + tokens and predicts eos at position
    max_len, so max_len <= max_positions - 1. The same float64 arithmetic as mtkit.search.max_lengths.
    """
    length = max(math.floor(a * src_len + b), 0)
    return length if max_positions is None else min(length, max_positions - 1)
