"""Subword regularization of training batches: BPE-dropout (Provilkov et al. 2020), as OpenNMT-py's
`src_subword_alpha`, Marian's `--sentencepiece-alphas` and Joey NMT's tokenizer `alpha` offer it through
sentencepiece.

The binarized data keeps the deterministic segmentation. Each word of a batch's sentences is segmented again from
its characters by the BPE model's merges (highest score first, as sentencepiece's BPE encodes), where at every merge
step each candidate merge is skipped with probability alpha; alpha 0 gives the stored pieces back. It is done here
rather than by sentencepiece's own sampling because that draws from a per-thread generator whose seed
`set_random_generator_seed` does not fix across processes (measured with sentencepiece 0.2.3: one seed, two
processes, two segmentations), which would break exact resume. The draws of a batch come from a seed made of
(train.seed, epoch, rank, batch position) alone, which the checkpoint already holds, so a resumed run samples what
an uninterrupted one sampled, and collating on a background thread changes nothing. Leading ids that preprocess put
before the sentence (a target-language token, a corpus tag) are kept as they are, and so is a word holding a byte
or unknown piece. sentencepiece (to read the model) and numpy only.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

import numpy as np
import sentencepiece as spm

from mtkit.errors import check

WORD_START = "\u2581"  # sentencepiece's "▁": a piece that begins with it begins a word


@dataclass(frozen=True)
class SubwordSampling:
    """What to sample: `alpha`, the probability of skipping each candidate merge at each step, and on which sides."""

    alpha: float
    sides: str = "both"  # "both" or "source"

    def __post_init__(self) -> None:
        check(
            0.0 < self.alpha <= 1.0,
            f"train.subword_alpha must be in (0, 1] to sample (0 turns it off), got {self.alpha}",
        )
        check(self.sides in ("both", "source"), f"train.subword_sides must be both or source, got {self.sides!r}")


def batch_seed(seed: int, epoch: int, position: int, rank: int = 0, side: str = "src") -> int:
    """The sampling seed of one side of the batch at `position` of rank `rank`'s share of `epoch`: a hash
    (sentencepiece takes 32 bits), so that neighbouring batches, ranks and seeds draw unrelated streams."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{epoch}:{rank}:{position}:{side}".encode()).digest()[:4], "little")


class SubwordSampler:
    """Segments id sequences again with BPE-dropout from a sentencepiece BPE model."""

    def __init__(self, spm_model: bytes, sampling: SubwordSampling, max_len: int) -> None:
        processor = spm.SentencePieceProcessor(model_proto=spm_model)
        size = processor.get_piece_size()
        special = [i for i in range(size) if processor.is_control(i) or processor.is_unknown(i) or processor.is_byte(i)]
        # sentencepiece orders control and unknown pieces, then user-defined ones, then bytes, then the merges' pieces
        first = max(special, default=-1) + 1
        self.pieces = [processor.id_to_piece(i) for i in range(size)]
        self.ids = {self.pieces[i]: i for i in range(first, size)}
        self.scores = {self.pieces[i]: processor.get_score(i) for i in range(first, size) if len(self.pieces[i]) > 1}
        self.first = first
        self.sampling = sampling
        self.max_len = max_len  # a sampled sequence longer than this keeps its stored segmentation

    def resample(self, ids: list[np.ndarray], keep: list[int], seed: int) -> list[np.ndarray]:
        """Each sequence with its first keep[i] ids as they are and the rest segmented again, drawn from `seed`."""
        rng = random.Random(seed)
        out = []
        for sequence, lead in zip(ids, keep):
            sampled = self._sentence(sequence[lead:].tolist(), rng)
            if lead + len(sampled) > self.max_len:
                out.append(sequence)
            else:
                out.append(np.concatenate([sequence[:lead], np.asarray(sampled, dtype=sequence.dtype)]))
        return out

    def _sentence(self, ids: list[int], rng: random.Random) -> list[int]:
        words: list[list[int]] = []
        for i in ids:
            if not words or self.pieces[i].startswith(WORD_START):
                words.append([])
            words[-1].append(i)
        return [i for word in words for i in self._word(word, rng)]

    def _word(self, ids: list[int], rng: random.Random) -> list[int]:
        if any(i < self.first for i in ids):  # a byte, unknown or user-defined piece: kept as stored
            return ids
        symbols = list("".join(self.pieces[i] for i in ids))
        alpha = self.sampling.alpha
        while len(symbols) > 1:
            candidates = sorted(
                (
                    (-self.scores[pair], i)
                    for i, pair in enumerate(a + b for a, b in zip(symbols, symbols[1:]))
                    if pair in self.scores
                )
            )
            chosen = next((i for _, i in candidates if rng.random() >= alpha), None)
            if chosen is None:
                break
            symbols[chosen : chosen + 2] = [symbols[chosen] + symbols[chosen + 1]]
        found = [self.ids.get(symbol) for symbol in symbols]
        return ids if None in found else found  # type: ignore[return-value]


@dataclass
class BatchResampler:
    """What training asks: the sentences of one batch segmented again, each side from its own seed."""

    sampler: SubwordSampler
    leads: np.ndarray  # per training sentence (index into the training data): the ids preprocess put before it
    seed: int
    rank: int

    def __call__(
        self, src: list[np.ndarray], tgt: list[np.ndarray], indices: np.ndarray, position: int, epoch: int
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        src = self.sampler.resample(
            src, self.leads[indices].tolist(), batch_seed(self.seed, epoch, position, self.rank)
        )
        if self.sampler.sampling.sides == "both":
            tgt = self.sampler.resample(tgt, [0] * len(tgt), batch_seed(self.seed, epoch, position, self.rank, "tgt"))
        return src, tgt
