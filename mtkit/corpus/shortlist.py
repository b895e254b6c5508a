"""A lexical shortlist: for each source piece, the target pieces a translation of it may use, counted from the
co-occurrence of pieces in the sentence pairs of a preprocessed directory's training corpora.

Written in CTranslate2's vocabulary-map format (`source piece<TAB>target pieces`, the empty key: pieces always
allowed), which its search reads with `use_vmap`. Counting and writing; no model, no engine, no torch (numpy
and, to count, the binarized reader). Its files and record: mtkit.corpus.shortlist_record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mtkit.corpus.shortlist_record import read_shortlist, write_shortlist
from mtkit.errors import check
from mtkit.file_names import SPM_NAME
from mtkit.files import file_sha256
from mtkit.tokenizer import load_tokenizer

if TYPE_CHECKING:
    from mtkit.corpus.binarized import ParallelData

CHUNK_PAIRS = 4096  # sentence pairs counted per numpy pass


@dataclass(frozen=True)
class ShortlistConfig:
    """How many target pieces a sentence may choose from: the `frequent` ones always, and each source piece's
    `best`, ranked by the Dice coefficient of the two pieces' sentence counts."""

    frequent: int = field(
        default=100,
        metadata={"help": "The most frequent target pieces of the corpus, candidates in every sentence."},
    )
    best: int = field(
        default=50,
        metadata={"help": "Per source piece, its target pieces of highest Dice coefficient (co-occurrence)."},
    )
    max_pairs: int = field(
        default=2_000_000,
        metadata={"help": "Count at most this many sentence pairs, spread evenly over the corpus (0: all)."},
    )

    def __post_init__(self) -> None:
        check(self.frequent >= 0, f"--frequent must be 0 or more; got {self.frequent}")
        check(self.best >= 1, f"--best must be 1 or more; got {self.best}")
        check(self.max_pairs >= 0, f"--max-pairs must be 0 or more; got {self.max_pairs}")


@dataclass
class Counts:
    """Sentence counts: of each source piece, of each target piece, and of each (source, target) pair of them."""

    source: np.ndarray
    target: np.ndarray
    pair_keys: np.ndarray  # source id * target vocabulary size + target id, sorted
    pair_counts: np.ndarray
    sentences: int


def training_pairs(data_dir: str | Path) -> list[ParallelData]:
    """Every training corpus of a preprocessed directory, read in its own direction."""
    from mtkit.corpus.binarized import ParallelData, read_manifest, training_corpora  # torch: only when counting

    manifest = read_manifest(data_dir)
    corpora = training_corpora(manifest)
    check(bool(corpora), f"{data_dir}: no training corpus to count (preprocess one with --train)")
    return [
        ParallelData.open(data_dir, entry["split"], entry["source_lang"], entry["target_lang"])
        for entry in corpora.values()
    ]


def _chosen(total: int, max_pairs: int) -> np.ndarray:
    """Indices of the pairs counted: all, or `max_pairs` spread evenly (a corpus sorted by source is not cut)."""
    if not max_pairs or total <= max_pairs:
        return np.arange(total)
    return np.unique(np.linspace(0, total - 1, max_pairs).astype(np.int64))


def _chunks(parts: list[ParallelData], max_pairs: int) -> Iterator[list[tuple[np.ndarray, np.ndarray]]]:
    total = sum(len(part) for part in parts)
    shares = [max(1, round(max_pairs * len(part) / total)) if max_pairs else 0 for part in parts]
    for part, share in zip(parts, shares):
        chosen = _chosen(len(part), share)
        for start in range(0, len(chosen), CHUNK_PAIRS):
            yield [(np.unique(part.src(i)), np.unique(part.tgt(i))) for i in chosen[start : start + CHUNK_PAIRS]]


def _merge(keys: np.ndarray, counts: np.ndarray, more_keys: np.ndarray, more_counts: np.ndarray) -> tuple:
    """Two sorted (key, count) tables as one: counts of a key in both added."""
    merged, inverse = np.unique(np.concatenate([keys, more_keys]), return_inverse=True)
    return merged, np.bincount(inverse, weights=np.concatenate([counts, more_counts])).astype(np.int64)


def count_pieces(parts: list[ParallelData], vocab: int, target_vocab: int, max_pairs: int = 0) -> Counts:
    """In how many sentence pairs each source piece, target piece and (source, target) pair occurs."""
    source = np.zeros(vocab, np.int64)
    target = np.zeros(target_vocab, np.int64)
    keys, counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
    sentences = 0
    for chunk in _chunks(parts, max_pairs):
        sentences += len(chunk)
        src = [s.astype(np.int64) for s, _ in chunk]
        tgt = [t.astype(np.int64) for _, t in chunk]
        np.add.at(source, np.concatenate(src), 1)
        np.add.at(target, np.concatenate(tgt), 1)
        chunk_keys = np.concatenate([(s[:, None] * target_vocab + t[None, :]).ravel() for s, t in zip(src, tgt)])
        more_keys, more_counts = np.unique(chunk_keys, return_counts=True)
        keys, counts = _merge(keys, counts, more_keys, more_counts)
    return Counts(source, target, keys, counts, sentences)


def candidates(counts: Counts, cfg: ShortlistConfig) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """(the frequent target ids, source id -> its best target ids, best first).

    Dice, 2 c(s,t) / (c(s) + c(t)), ranks a piece's own translation above the pieces frequent everywhere (those
    are candidates anyway); ties go to the lower id, so the same counts give the same list on every machine.
    """
    target_vocab = len(counts.target)
    order = np.lexsort((np.arange(target_vocab), -counts.target))
    frequent = np.sort(order[: cfg.frequent][counts.target[order[: cfg.frequent]] > 0])
    src_ids, tgt_ids = np.divmod(counts.pair_keys, target_vocab)
    dice = 2.0 * counts.pair_counts / (counts.source[src_ids] + counts.target[tgt_ids])
    ranked = np.lexsort((tgt_ids, -dice, src_ids))  # by source, then Dice (high first), then target id
    src_sorted = src_ids[ranked]
    starts = np.searchsorted(src_sorted, src_sorted, side="left")
    keep = ranked[np.arange(len(ranked)) - starts < cfg.best]
    best: dict[int, np.ndarray] = {}
    bounds = np.flatnonzero(np.diff(src_ids[keep])) + 1
    for group in np.split(keep, bounds) if len(keep) else []:
        best[int(src_ids[group[0]])] = tgt_ids[group]
    return frequent, best


def vmap_text(
    frequent: np.ndarray, best: dict[int, np.ndarray], source_pieces: list[str], target_pieces: list[str]
) -> str:
    """CTranslate2's vocabulary map: the frequent pieces under the empty key, then one line per source piece, its
    candidates and, where the target vocabulary has the same piece (a shared vocabulary), the piece itself: a name
    or number the corpus never paired can still be copied."""
    target_ids = {piece: i for i, piece in enumerate(target_pieces)}
    lines = ["\t" + " ".join(target_pieces[i] for i in frequent)]
    for source_id, piece in enumerate(source_pieces):
        chosen = [int(i) for i in best.get(source_id, ())]
        same = target_ids.get(piece)
        if same is not None and same not in chosen:
            chosen.append(same)
        if chosen:
            lines.append(piece + "\t" + " ".join(target_pieces[i] for i in chosen))
    return "\n".join(lines) + "\n"


def make_shortlist(run_dir: Path, data_dir: Path, cfg: ShortlistConfig) -> dict[str, Any]:
    """Count DATA_DIR's training corpora and write RUN_DIR's shortlist; the data must be tokenized with the run's
    sentencepiece model (the directory the run was trained on, or another made with its model). Returns the record."""
    from mtkit.corpus.binarized import read_manifest  # torch: only when counting

    spm_path = run_dir / SPM_NAME
    check(spm_path.is_file(), f"{run_dir}: no spm.model here (a run directory of `mtkit train` or `mtkit import`)")
    spm_sha256 = file_sha256(spm_path)
    manifest = read_manifest(data_dir)
    check(
        manifest.get("spm_sha256") == spm_sha256,
        f"{data_dir}: tokenized with another sentencepiece model than {spm_path}; give the run's own data directory",
    )
    tokenizer = load_tokenizer(spm_path)
    pieces, target_pieces = tokenizer.pieces(), tokenizer.target_pieces()
    counts = count_pieces(training_pairs(data_dir), len(pieces), len(target_pieces), cfg.max_pairs)
    frequent, best = candidates(counts, cfg)
    text = vmap_text(frequent, best, pieces, target_pieces)
    info = {
        **dataclasses.asdict(cfg),
        "data": str(data_dir),
        "pairs_counted": counts.sentences,
        "source_pieces": len(best),
        "spm_sha256": spm_sha256,
    }
    write_shortlist(run_dir, text, info)
    return read_shortlist(run_dir) or info
