"""Raw parallel text (read by mtkit.sources) -> sentencepiece model + binarized splits + manifest.json, streaming
and in parallel (its settings: mtkit.preprocess_config): cleaning with drop counts (lengths, mtkit.corpus_filters, dedup),
encoding in worker processes, the manifest.
Text is kept as is except that leading/trailing whitespace is stripped (control characters stay: byte fallback
encodes them). Only the train split is cleaned; valid/test keep exactly one pair per line. Memory does not grow
with the corpus (dedup aside: 8 bytes per kept training pair).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from rich.progress import Progress

from mtkit.console import log, progress
from mtkit.corpus_filters import FILTER_REASONS, PairFilters
from mtkit.data import FORMAT, MANIFEST, VERSION, BinaryWriter, token_dtype
from mtkit.errors import check
from mtkit.files import atomic_directory, write_text
from mtkit.preprocess_config import PreprocessConfig
from mtkit.sources import Source, file_source, hf_chunks, hf_source, load_hf_split
from mtkit.tokenizer import (
    TableTokenizer,
    Tokenizer,
    file_sha256,
    load_tokenizer,
    tokenizer_from_bytes,
    train_tokenizer,
)

DROP_REASONS = ("empty", "too_short", "too_long", "ratio", *FILTER_REASONS, "duplicate")  # in the order tried
CHUNK_PAIRS = 10_000  # pairs per worker task: large enough to amortize pickling, small enough to stream
SPM_MODEL = "spm.model"


@dataclass
class _EncodedChunk:
    """Kept pairs of one chunk as flat id arrays plus lengths; what a worker sends back."""

    src: np.ndarray
    src_lens: np.ndarray
    tgt: np.ndarray
    tgt_lens: np.ndarray
    dropped: dict[str, int]
    digests: np.ndarray | None  # uint64 per kept pair when deduplicating


def preprocess(cfg: PreprocessConfig, out_dir: Path) -> dict:
    """Build `out_dir` (spm.model, {split}.{lang}.bin/.idx, manifest.json) atomically; returns the manifest."""
    out_dir = Path(out_dir)
    check(
        not out_dir.exists() or (out_dir.is_dir() and (not any(out_dir.iterdir()) or (out_dir / MANIFEST).is_file())),
        f"{out_dir}: exists and is not a preprocessed data directory; choose another output directory",
    )
    sources = _plan_sources(cfg)  # every count and mismatch check happens before anything is written
    reused = load_tokenizer(cfg.spm_model) if cfg.spm_model else None
    check(reused is None or token_dtype(reused.vocab_size) == token_dtype(reused.target_vocab_size),
          f"{cfg.spm_model}: source and target vocabularies too different in size for one token file format")
    has_train = any(source.name == "train" for source in sources)
    check(reused is not None or has_train, "no train split to train sentencepiece on (give one, or an spm_model)")
    filters = _build_filters(cfg) if any(source.clean for source in sources) else None
    with atomic_directory(out_dir) as tmp:
        if reused is not None:
            (tmp / SPM_MODEL).write_bytes(reused.to_bytes())
            tokenizer = reused
        else:
            tokenizer = _train_sentencepiece(cfg, next(s for s in sources if s.name == "train"), tmp / SPM_MODEL)
        splits = _encode_all(cfg, sources, tokenizer, filters, tmp)
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "source_lang": cfg.source_lang,
            "target_lang": cfg.target_lang,
            "vocab_size": tokenizer.vocab_size,
            "spm_sha256": file_sha256(tmp / SPM_MODEL),
            "splits": splits,
            "options": asdict(cfg),
        }
        write_text(tmp / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return manifest


def load_hf_pairs(
    name: str,
    config: str | None,
    split: str,
    src_lang: str,
    tgt_lang: str,
    data_files: str | list | dict | None = None,
    cache_dir: str | None = None,
) -> Iterator[tuple[str, str]]:
    """(source, target) pairs of a Hugging Face dataset split with a `translation` column (as wmt/wmt14).

    `name` is a hub name, a builder such as "json" with `data_files`, or a DatasetDict saved with
    `save_to_disk`.
    """
    dataset = load_hf_split(name, config, split, src_lang, tgt_lang, data_files, cache_dir)
    return (pair for src, tgt in hf_chunks(dataset, src_lang, tgt_lang, CHUNK_PAIRS) for pair in zip(src, tgt))


def _plan_sources(cfg: PreprocessConfig) -> list[Source]:
    """Resolve, open and count every split; file and line-count problems surface here."""
    langs = (cfg.source_lang, cfg.target_lang)
    files = [("train", cfg.train, True)] if cfg.train else []  # (split name, prefix, clean)
    files += [("valid", cfg.valid, False)] if cfg.valid else []
    files += [(Path(prefix).name, prefix, False) for prefix in cfg.test]
    sources = [file_source(name, prefix, langs, cfg.on_bad_utf8, clean, CHUNK_PAIRS) for name, prefix, clean in files]
    if cfg.hf_dataset:
        for name, hf_split in cfg.hf_splits.items():
            dataset = load_hf_split(cfg.hf_dataset, cfg.hf_config, hf_split, *langs, cache_dir=cfg.hf_cache_dir)
            sources.append(hf_source(name, dataset, langs, name == "train", CHUNK_PAIRS))
    check(sources, "nothing to preprocess: give a train, valid or test prefix, or a Hugging Face dataset")
    names = [source.name for source in sources]
    repeated = sorted({name for name in names if names.count(name) > 1})
    check(not repeated, f"two splits would both be named {', '.join(repeated)}; rename one of the files")
    return sources


def _build_filters(cfg: PreprocessConfig) -> PairFilters:
    """The chosen corpus filters, built in this process before the workers fork (they inherit the compiled script
    tables and the loaded detector); an unknown language is refused here, before anything is written."""
    return PairFilters.build(cfg.source_lang, cfg.target_lang, cfg.filter_same, cfg.filter_scripts, cfg.filter_langid)


def _train_sentencepiece(cfg: PreprocessConfig, train: Source, path: Path) -> Tokenizer:
    log(
        f"training sentencepiece BPE (vocab {cfg.vocab_size}) on up to {cfg.input_sentence_size} sentences "
        f"sampled from both sides of {train.count} train pairs"
    )
    sentences = (text for chunk in train.chunks() for side in chunk for text in map(str.strip, side) if text)
    train_tokenizer(
        sentences,
        path,
        cfg.vocab_size,
        character_coverage=cfg.character_coverage,
        input_sentence_size=cfg.input_sentence_size,
        seed=cfg.seed,
        num_threads=cfg.workers,
    )
    return Tokenizer.load(path)


def _encode_all(
    cfg: PreprocessConfig, sources: list[Source], tokenizer: Tokenizer | TableTokenizer, filters: PairFilters | None,
    out_dir: Path,
) -> dict:
    """Encode and write every split with `cfg.workers` processes; returns the per-split statistics."""
    log(f"encoding {sum(s.count for s in sources)} pairs with {cfg.workers} worker(s)")
    if cfg.workers == 1:
        encoder = _ChunkEncoder(tokenizer.to_bytes(), cfg, filters)
        return _write_splits(cfg, sources, tokenizer.vocab_size, out_dir, functools.partial(map, encoder))
    # fork shares the parent's loaded modules; spawn would re-import torch in every worker.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    # The pool starts before the progress display, whose refresh thread must not be forked.
    initargs = (tokenizer.to_bytes(), cfg, filters)
    with multiprocessing.get_context(method).Pool(cfg.workers, _init_worker, initargs) as pool:
        encode_chunks = functools.partial(_ordered_map, pool, _encode_in_worker, window=2 * cfg.workers)
        return _write_splits(cfg, sources, tokenizer.vocab_size, out_dir, encode_chunks)


def _write_splits(
    cfg: PreprocessConfig, sources: list[Source], vocab_size: int, out_dir: Path, encode_chunks: Callable
) -> dict:
    with progress() as bar:
        return {source.name: _write_split(cfg, source, vocab_size, out_dir, encode_chunks, bar) for source in sources}


def _write_split(
    cfg: PreprocessConfig, source: Source, vocab_size: int, out_dir: Path, encode_chunks: Callable, bar: Progress
) -> dict:
    """Stream one split through the encoders into its two binary files; returns its statistics."""
    task = bar.add_task(source.name, total=source.count, info="")
    seen = _DigestSet() if source.clean and cfg.dedup else None
    stats = {"pairs": 0, "input_pairs": source.count, "src_tokens": 0, "tgt_tokens": 0}
    dropped = dict.fromkeys(DROP_REASONS, 0)
    with (
        BinaryWriter(out_dir, source.name, cfg.source_lang, vocab_size) as src_out,
        BinaryWriter(out_dir, source.name, cfg.target_lang, vocab_size) as tgt_out,
    ):
        for chunk in encode_chunks((src, tgt, source.clean) for src, tgt in source.chunks()):
            if seen is not None:
                chunk = _drop_duplicates(chunk, seen)
            src_out.write_flat(chunk.src, chunk.src_lens)
            tgt_out.write_flat(chunk.tgt, chunk.tgt_lens)
            stats["pairs"] += len(chunk.src_lens)
            stats["src_tokens"] += len(chunk.src)
            stats["tgt_tokens"] += len(chunk.tgt)
            for reason, count in chunk.dropped.items():
                dropped[reason] += count
            bar.update(task, advance=len(chunk.src_lens) + sum(chunk.dropped.values()))
    reasons = ", ".join(f"{count:,} {reason.replace('_', ' ')}" for reason, count in dropped.items() if count)
    log(f"{source.name}: kept {stats['pairs']:,} of {source.count:,} pairs (dropped: {reasons or 'none'})")
    return {**stats, "dropped": dropped}


def _ordered_map(pool: multiprocessing.pool.Pool, fn: Callable, tasks: Iterable, window: int) -> Iterator:
    """pool.imap with at most `window` tasks in flight: imap reads its whole input ahead of the
    workers, so memory would grow with the corpus whenever reading is faster than encoding."""
    pending: deque = deque()
    for task in tasks:
        pending.append(pool.apply_async(fn, (task,)))
        if len(pending) >= window:
            yield pending.popleft().get()
    while pending:
        yield pending.popleft().get()


class _ChunkEncoder:
    """Strip, encode and (train split only) filter one chunk; runs inside a worker process."""

    def __init__(self, model: bytes, cfg: PreprocessConfig, filters: PairFilters | None) -> None:
        self.tokenizer = tokenizer_from_bytes(model)
        self.dtype = token_dtype(self.tokenizer.vocab_size)
        self.cfg = cfg
        self.filters = filters

    def __call__(self, task: tuple[list[str], list[str], bool]) -> _EncodedChunk:
        src_text, tgt_text, clean = task
        src_text = [text.strip() for text in src_text]
        tgt_text = [text.strip() for text in tgt_text]
        src_ids, tgt_ids = self.tokenizer.encode(src_text), self.tokenizer.encode_target(tgt_text)
        src_lens = np.fromiter(map(len, src_ids), np.int64, len(src_ids))
        tgt_lens = np.fromiter(map(len, tgt_ids), np.int64, len(tgt_ids))
        keep = np.ones(len(src_ids), dtype=bool)
        dropped: dict[str, int] = {}
        if clean:
            keep, dropped = _filter(src_lens, tgt_lens, self.cfg)
            if self.filters is not None:
                dropped.update(self.filters.narrow(src_text, tgt_text, keep))
        digests = None
        if clean and self.cfg.dedup:
            digests = _pair_digests(itertools.compress(zip(src_text, tgt_text), keep))
        return _EncodedChunk(
            _flatten(src_ids, src_lens, keep, self.dtype),
            src_lens[keep],
            _flatten(tgt_ids, tgt_lens, keep, self.dtype),
            tgt_lens[keep],
            dropped,
            digests,
        )


_worker_encoder: _ChunkEncoder | None = None


def _init_worker(model: bytes, cfg: PreprocessConfig, filters: PairFilters | None) -> None:
    global _worker_encoder
    _worker_encoder = _ChunkEncoder(model, cfg, filters)  # the model is loaded once per worker


def _encode_in_worker(task: tuple[list[str], list[str], bool]) -> _EncodedChunk:
    assert _worker_encoder is not None, "worker used without _init_worker"
    return _worker_encoder(task)


def _filter(src_lens: np.ndarray, tgt_lens: np.ndarray, cfg: PreprocessConfig) -> tuple[np.ndarray, dict[str, int]]:
    """Keep mask and drop counts; a pair is counted under the first reason that applies."""
    shorter, longer = np.minimum(src_lens, tgt_lens), np.maximum(src_lens, tgt_lens)
    reasons = {
        "empty": shorter == 0,
        "too_short": shorter < cfg.min_len,
        "too_long": longer > cfg.max_len,
        "ratio": longer > cfg.max_ratio * np.maximum(shorter, 1),
    }
    keep = np.ones(len(src_lens), dtype=bool)
    dropped = {}
    for reason, bad in reasons.items():
        dropped[reason] = int((bad & keep).sum())
        keep &= ~bad
    return keep, dropped


def _flatten(ids: list[list[int]], lens: np.ndarray, keep: np.ndarray, dtype: np.dtype) -> np.ndarray:
    kept = ids if keep.all() else itertools.compress(ids, keep)
    return np.fromiter(itertools.chain.from_iterable(kept), dtype, int(lens[keep].sum()))


def _pair_digests(pairs: Iterable[tuple[str, str]]) -> np.ndarray:
    """8-byte BLAKE2b per pair; the source length prefix keeps ("ab", "c") apart from ("a", "bc")."""
    digests = b"".join(
        hashlib.blake2b(f"{len(src)}:{src}{tgt}".encode(), digest_size=8).digest() for src, tgt in pairs
    )
    return np.frombuffer(digests, dtype=np.uint64)


def _drop_duplicates(chunk: _EncodedChunk, seen: _DigestSet) -> _EncodedChunk:
    fresh = seen.add_new(chunk.digests)
    if fresh.all():
        return replace(chunk, dropped={**chunk.dropped, "duplicate": 0})
    return _EncodedChunk(
        chunk.src[np.repeat(fresh, chunk.src_lens)],
        chunk.src_lens[fresh],
        chunk.tgt[np.repeat(fresh, chunk.tgt_lens)],
        chunk.tgt_lens[fresh],
        {**chunk.dropped, "duplicate": int((~fresh).sum())},
        None,
    )


class _DigestSet:
    """Seen uint64 digests as a few sorted arrays merged like a binary counter: 8 bytes per pair
    (a Python set of ints costs about 70) and O(log n) arrays to search per chunk."""

    def __init__(self) -> None:
        self._levels: list[np.ndarray] = []

    def add_new(self, digests: np.ndarray) -> np.ndarray:
        """Mask of the digests not seen before (first occurrence within the batch); adds them."""
        unique, first = np.unique(digests, return_index=True)
        fresh = np.ones(len(unique), dtype=bool)
        for level in self._levels:
            where = np.minimum(np.searchsorted(level, unique), len(level) - 1)
            fresh &= level[where] != unique
        mask = np.zeros(len(digests), dtype=bool)
        mask[first[fresh]] = True
        if fresh.any():
            self._levels.append(unique[fresh])
        while len(self._levels) > 1 and len(self._levels[-2]) <= len(self._levels[-1]):
            newest, older = self._levels.pop(), self._levels.pop()
            self._levels.append(np.sort(np.concatenate([older, newest])))
        return mask
