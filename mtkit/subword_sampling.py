"""Subword regularization of training batches: each sentence is segmented again with sentencepiece's sampling
(BPE-dropout for mtkit's BPE models, Provilkov et al. 2020; n-best sampling for unigram models, Kudo 2018), as
OpenNMT-py's `src_subword_alpha`, Marian's `--sentencepiece-alphas` and Joey NMT's tokenizer `alpha` do.

The binarized data keeps the deterministic segmentation; a batch's sentences are decoded back to their text
(exact: identity normalisation, whitespace kept, byte fallback) and encoded again with sampling. The draws of a
batch come from a seed made of (train.seed, epoch, batch position) alone, which the checkpoint already holds, so a
resumed run samples what an uninterrupted one sampled, and collating on a background thread changes nothing.
Leading ids that preprocess put before the sentence (a target-language token, a corpus tag) are kept as they are.
sentencepiece and numpy only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import sentencepiece as spm

from mtkit.errors import check


@dataclass(frozen=True)
class SubwordSampling:
    """What to sample: `alpha` (BPE: the probability of dropping each merge; unigram: the smoothing exponent), on
    which sides, and the n-best size of a unigram model (-1: all segmentations; BPE models ignore it)."""

    alpha: float
    sides: str = "both"  # "both" or "source"
    nbest: int = -1

    def __post_init__(self) -> None:
        check(0.0 < self.alpha <= 1.0, f"train.subword_alpha must be in (0, 1] to sample (0 turns it off), got {self.alpha}")
        check(self.sides in ("both", "source"), f"train.subword_sides must be both or source, got {self.sides!r}")


def batch_seed(seed: int, epoch: int, position: int) -> int:
    """The sampling seed of the batch at `position` of `epoch`: a hash (sentencepiece takes 32 bits), so that
    neighbouring batches and seeds draw unrelated streams."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{epoch}:{position}".encode()).digest()[:4], "little")


class SubwordSampler:
    """Segments id sequences again with sampling; one per process (the collate thread uses it)."""

    def __init__(self, spm_model: bytes, sampling: SubwordSampling, max_len: int) -> None:
        self._processor = spm.SentencePieceProcessor(model_proto=spm_model)
        self.sampling = sampling
        self.max_len = max_len  # a sampled sequence longer than this keeps its stored segmentation

    def resample(self, ids: list[np.ndarray], keep: list[int], seed: int) -> list[np.ndarray]:
        """Each sequence with its first keep[i] ids as they are and the rest segmented again, drawn from `seed`."""
        texts = [self._processor.decode(sequence[lead:].tolist()) for sequence, lead in zip(ids, keep)]
        spm.set_random_generator_seed(seed)
        sampled = self._processor.encode(texts, enable_sampling=True, alpha=self.sampling.alpha,
                                         nbest_size=self.sampling.nbest, num_threads=1)
        out = []
        for sequence, lead, pieces in zip(ids, keep, sampled):
            if lead + len(pieces) > self.max_len:
                out.append(sequence)
            else:
                out.append(np.concatenate([sequence[:lead], np.asarray(pieces, dtype=sequence.dtype)]))
        return out
