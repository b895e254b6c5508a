"""Raw parallel text (planned by mtkit.corpus.plan) -> sentencepiece model + binarized splits + manifest.json,
streaming and in parallel (its settings: mtkit.corpus.config): cleaning per training corpus with drop counts
(lengths, mtkit.corpus.filters, dedup), language token and tag ids before each source, encoding in worker processes.
Text is kept as is except that leading/trailing whitespace is stripped (control characters stay: byte fallback
encodes them). Only training corpora are cleaned; valid/test keep exactly one pair per line. Memory does not grow
with the corpus (dedup aside: 8 bytes per kept training pair). A shard (`--shard K/N`) writes its share of the
training corpora, and what the join (mtkit.corpus.shards) needs, into DATA.shard-K-of-N/.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from rich.progress import Progress

from mtkit.console import log, progress
from mtkit.corpus.binarized import FORMAT, VERSION, BinaryWriter, token_dtype
from mtkit.corpus.config import CleaningConfig, CorpusConfig, PreprocessConfig, manifest_options
from mtkit.corpus.filters import FILTER_REASONS, PairFilters
from mtkit.corpus.fuzzy_matches import Matcher
from mtkit.corpus.plan import Plan, Split, plan_splits, shard_plan
from mtkit.corpus.sharding import shard_path
from mtkit.corpus.term_alignments import carry_alignments, ensure_alignments
from mtkit.corpus.term_hints import TERM_PIECES, term_pieces
from mtkit.corpus.tokenizer_training import train_tokenizer
from mtkit.errors import check
from mtkit.file_names import MANIFEST_NAME, SPM_NAME
from mtkit.files import atomic_directory, atomic_write, file_sha256, write_text
from mtkit.tokenizer import TableTokenizer, Tokenizer, load_tokenizer, tokenizer_from_bytes

DROP_REASONS = ("empty", "too_short", "too_long", "ratio", *FILTER_REASONS, "duplicate")  # in the order tried
CHUNK_PAIRS = 10_000  # pairs per worker task: large enough to amortize pickling, small enough to stream
DIGESTS = "{split}.digests"  # in a shard's directory: the uint64 digest of each kept pair of a deduplicated corpus


@dataclass
class _EncodedChunk:
    """Kept pairs of one chunk as flat id arrays plus lengths; what a worker sends back."""

    src: np.ndarray
    src_lens: np.ndarray
    tgt: np.ndarray
    tgt_lens: np.ndarray
    dropped: dict[str, int]
    digests: np.ndarray | None  # uint64 per kept pair when deduplicating


def preprocess(
    cfg: PreprocessConfig,
    out_dir: Path,
    shard: tuple[int, int] | None = None,
    term_hints: bool = False,
    matcher: Matcher | None = None,
) -> dict:
    """Build `out_dir` (spm.model, {split}.{lang}.bin/.idx, manifest.json) atomically; returns the manifest.

    `shard` (K, N): shard K of N (mtkit.corpus.plan.shard_plan) into DATA.shard-K-of-N beside `out_dir`, its manifest
    holding its counts and a "shard" record, and each deduplicated corpus's kept digests (mtkit.corpus.shards joins
    the set into the `out_dir` one run writes). `term_hints` (the recipe's [term_hints] on): the sentencepiece model
    reserves mtkit.corpus.term_hints.TERM_PIECES (the manifest's "term_pieces"), and once the directory is complete,
    each training corpus is aligned beside it (mtkit.corpus.term_alignments; a shard leaves that to its join's first
    training run). `matcher`: the fuzzy matches of a corpus that asks for them (mtkit.corpus.fuzzy_matches)."""
    out_dir = Path(out_dir)
    if shard is not None:
        check(
            cfg.spm_model is not None,
            f"shard {shard[0]} of {shard[1]}: sharded preprocessing needs a sentencepiece model (--spm-model, or "
            "spm_model in the recipe): shards that each trained their own would not share one vocabulary",
        )
        out_dir = shard_path(out_dir, *shard)
    check(
        not out_dir.exists()
        or (out_dir.is_dir() and (not any(out_dir.iterdir()) or (out_dir / MANIFEST_NAME).is_file())),
        f"{out_dir}: exists and is not a preprocessed data directory; choose another output directory",
    )
    whole = plan_splits(cfg, CHUNK_PAIRS, matcher)  # every count and mismatch check happens before anything is written
    plan, lines = shard_plan(whole, *shard, CHUNK_PAIRS) if shard is not None else (whole, None)
    reused = load_tokenizer(cfg.spm_model) if cfg.spm_model else None
    check(
        reused is None or token_dtype(reused.vocab_size) == token_dtype(reused.target_vocab_size),
        f"{cfg.spm_model}: source and target vocabularies too different in size for one token file format",
    )
    check(
        reused is not None or plan.train_splits(),
        "no train split to train sentencepiece on (give one, or an spm_model)",
    )
    if reused is not None:
        _prefix_ids(whole, reused, str(cfg.spm_model))  # a tag or language token it lacks: refused before writing
        check(
            not term_hints or bool(term_pieces(reused)),
            f"{cfg.spm_model}: has no pieces {', '.join(TERM_PIECES)} for [term_hints]; preprocess without spm_model "
            "to train a sentencepiece model with them, or turn term hints off",
        )
    cleanings = [_cleaning(split.corpus) for split in plan.train_splits() if split.corpus is not None]
    with atomic_directory(out_dir) as tmp:
        if reused is not None:
            (tmp / SPM_NAME).write_bytes(reused.to_bytes())
            tokenizer = reused
        else:
            tokenizer = _train_sentencepiece(cfg, plan, tmp / SPM_NAME, TERM_PIECES if term_hints else ())
        prefixes = _prefix_ids(plan, tokenizer, SPM_NAME)
        splits = _encode_all(cfg, plan, prefixes, tokenizer, cleanings, tmp)
        first = plan.corpora[0] if plan.corpora else None
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            # Several pairs: the first corpus's languages (each split's own are in split_langs).
            "source_lang": first.source_lang if first else cfg.source_lang,
            "target_lang": first.target_lang if first else cfg.target_lang,
            "vocab_size": tokenizer.vocab_size,
            "spm_sha256": file_sha256(tmp / SPM_NAME),
            "splits": splits,
            "pairs": plan.pairs,
            "language_tokens": plan.language_tokens,
            "corpora": {
                split.corpus.name: _corpus_entry(split.corpus, split.name, splits[split.name])
                for split in plan.train_splits()
                if split.corpus is not None
            },
            "valid_splits": plan.valid_splits,
            "split_langs": {split.name: list(split.langs) for split in whole.splits},
            "options": manifest_options(cfg),
        }
        if term_hints:  # only then: a directory preprocessed without term hints is as it always was
            manifest["term_pieces"] = list(TERM_PIECES)
        if shard is not None:  # last: the join drops it and the rest is the whole run's manifest
            manifest["shard"] = {"index": shard[0], "count": shard[1], "chunk_pairs": CHUNK_PAIRS, "lines": lines}
        write_text(tmp / MANIFEST_NAME, json.dumps(manifest, indent=2) + "\n")
        if term_hints and shard is None and out_dir.is_dir():  # the same text preprocessed again: not aligned again
            carry_alignments(out_dir, tmp, manifest, cfg.seed)
    if term_hints and shard is None:
        ensure_alignments(out_dir, manifest, cfg.seed)
    return manifest


@dataclass
class _Cleaning:
    """A training corpus's cleaning settings and its built filters (compiled script tables, loaded detector), made in
    this process before the workers fork; an unknown language is refused here, before anything is written."""

    corpus: CorpusConfig
    filters: PairFilters


def _cleaning(corpus: CorpusConfig) -> _Cleaning:
    return _Cleaning(corpus, PairFilters.build(corpus.source_lang, corpus.target_lang, corpus.cleaning))


def _corpus_entry(corpus: CorpusConfig, split: str, stats: dict) -> dict:
    """The manifest's record of a training corpus: where it is, its direction, weight and tag, what was kept."""
    return {
        "split": split,
        "source_lang": corpus.source_lang,
        "target_lang": corpus.target_lang,
        "weight": corpus.weight,
        "tag": corpus.tag,
        **stats,
    }


def _prefix_ids(plan: Plan, tokenizer: Tokenizer | TableTokenizer, model_name: str) -> dict[str, tuple[int, ...]]:
    """Split name -> the ids put before each of its sources; a language token or tag that is not one piece of the
    model is refused naming its corpus (or split) and field."""
    ids = {piece: i for i, piece in enumerate(tokenizer.pieces())}
    prefixes = {}
    for split in plan.splits:
        for piece in split.prefix:
            owner = f"corpus {split.corpus.name}" if split.corpus is not None else f"split {split.name}"
            what = (
                f"tag {piece!r}"
                if split.corpus is not None and piece == split.corpus.tag
                else (f"language token {piece!r} (target_lang {split.langs[1]})")
            )
            check(piece in ids, f"{owner}: {what} is not a single piece of {model_name}")
        prefixes[split.name] = tuple(ids[piece] for piece in split.prefix)
    return prefixes


def _train_sentencepiece(cfg: PreprocessConfig, plan: Plan, path: Path, reserved: tuple[str, ...] = ()) -> Tokenizer:
    train = plan.train_splits()
    symbols = [*plan.symbols(), *reserved]
    log(
        f"training sentencepiece BPE (vocab {cfg.vocab_size}) on up to {cfg.input_sentence_size} sentences "
        f"sampled from both sides of {sum(split.source.count for split in train)} train pairs"
        + (f" of {len(train)} corpora" if len(train) > 1 else "")
        + (f"; one piece each: {' '.join(symbols)}" if symbols else "")
    )
    sentences = (
        text
        for split in train
        for chunk in split.source.chunks()
        for side in chunk
        for text in map(str.strip, side)
        if text
    )
    train_tokenizer(
        sentences,
        path,
        cfg.vocab_size,
        character_coverage=cfg.character_coverage,
        input_sentence_size=cfg.input_sentence_size,
        seed=cfg.seed,
        num_threads=cfg.workers,
        user_defined_symbols=symbols,
    )
    return Tokenizer.load(path)


def _encode_all(
    cfg: PreprocessConfig,
    plan: Plan,
    prefixes: dict[str, tuple[int, ...]],
    tokenizer: Tokenizer | TableTokenizer,
    cleanings: list[_Cleaning],
    out_dir: Path,
) -> dict:
    """Encode and write every split with `cfg.workers` processes; returns the per-split statistics."""
    log(f"encoding {sum(split.source.count for split in plan.splits)} pairs with {cfg.workers} worker(s)")
    if cfg.workers == 1:
        encoder = _ChunkEncoder(tokenizer.to_bytes(), cleanings)
        return _write_splits(plan, prefixes, tokenizer.vocab_size, out_dir, functools.partial(map, encoder))
    # fork shares the parent's loaded modules; spawn would re-import torch in every worker.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    # The pool starts before the progress display, whose refresh thread must not be forked.
    initargs = (tokenizer.to_bytes(), cleanings)
    with multiprocessing.get_context(method).Pool(cfg.workers, _init_worker, initargs) as pool:
        encode_chunks = functools.partial(_ordered_map, pool, _encode_in_worker, window=2 * cfg.workers)
        return _write_splits(plan, prefixes, tokenizer.vocab_size, out_dir, encode_chunks)


def _write_splits(
    plan: Plan, prefixes: dict[str, tuple[int, ...]], vocab_size: int, out_dir: Path, encode_chunks: Callable
) -> dict:
    cleaned = {split.name: i for i, split in enumerate(plan.train_splits())}  # index into the encoder's cleanings
    with progress() as bar:
        return {
            split.name: _write_split(
                split, cleaned.get(split.name, -1), prefixes[split.name], vocab_size, out_dir, encode_chunks, bar
            )
            for split in plan.splits
        }


def _write_split(
    split: Split,
    cleaning: int,
    prefix: tuple[int, ...],
    vocab_size: int,
    out_dir: Path,
    encode_chunks: Callable,
    bar: Progress,
) -> dict:
    """Stream one split through the encoders into its two binary files (a shard's deduplicated corpus: and its kept
    pairs' digests); returns its statistics."""
    source = split.source
    task = bar.add_task(split.name, total=source.count, info="")
    seen = DigestSet() if split.corpus is not None and split.corpus.cleaning.dedup else None
    stats = {"pairs": 0, "input_pairs": source.count, "src_tokens": 0, "tgt_tokens": 0}
    dropped = dict.fromkeys(DROP_REASONS, 0)
    with (
        BinaryWriter(out_dir, split.name, split.langs[0], vocab_size) as src_out,
        BinaryWriter(out_dir, split.name, split.langs[1], vocab_size) as tgt_out,
        _digest_file(out_dir / DIGESTS.format(split=split.name), split.keep_digests and seen is not None) as digest_out,
    ):
        for chunk in encode_chunks((src, tgt, cleaning, prefix) for src, tgt in source.chunks()):
            if seen is not None:
                chunk = _drop_duplicates(chunk, seen)
                if digest_out is not None:
                    digest_out.write(np.ascontiguousarray(chunk.digests, np.uint64).tobytes())
            src_out.write_flat(chunk.src, chunk.src_lens)
            tgt_out.write_flat(chunk.tgt, chunk.tgt_lens)
            stats["pairs"] += len(chunk.src_lens)
            stats["src_tokens"] += len(chunk.src)
            stats["tgt_tokens"] += len(chunk.tgt)
            for reason, count in chunk.dropped.items():
                dropped[reason] += count
            bar.update(task, advance=len(chunk.src_lens) + sum(chunk.dropped.values()))
    reasons = ", ".join(f"{count:,} {reason.replace('_', ' ')}" for reason, count in dropped.items() if count)
    log(f"{split.name}: kept {stats['pairs']:,} of {source.count:,} pairs (dropped: {reasons or 'none'})")
    return {**stats, "dropped": dropped}


def _digest_file(path: Path, wanted: bool) -> contextlib.AbstractContextManager:
    """The kept digests' file, written atomically as the binary files are, when `wanted`; else None."""
    return atomic_write(path, "wb") if wanted else contextlib.nullcontext()


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


_Task = tuple[list[str], list[str], int, tuple[int, ...]]  # source lines, target lines, cleaning (-1: none), prefix


class _ChunkEncoder:
    """Strip, encode and (training corpora only) filter one chunk, then put the prefix ids (language token, tag)
    before each source; runs inside a worker process."""

    def __init__(self, model: bytes, cleanings: list[_Cleaning]) -> None:
        self.tokenizer = tokenizer_from_bytes(model)
        self.dtype = token_dtype(self.tokenizer.vocab_size)
        self.cleanings = cleanings

    def __call__(self, task: _Task) -> _EncodedChunk:
        src_text, tgt_text, cleaning, prefix = task
        src_text = [text.strip() for text in src_text]
        tgt_text = [text.strip() for text in tgt_text]
        src_ids, tgt_ids = self.tokenizer.encode(src_text), self.tokenizer.encode_target(tgt_text)
        src_lens = np.fromiter(map(len, src_ids), np.int64, len(src_ids))
        tgt_lens = np.fromiter(map(len, tgt_ids), np.int64, len(tgt_ids))
        keep = np.ones(len(src_ids), dtype=bool)
        dropped: dict[str, int] = {}
        digests = None
        if cleaning >= 0:
            # The rules see the sentence's own pieces: a corpus cleans alike with or without a tag.
            corpus, filters = self.cleanings[cleaning].corpus, self.cleanings[cleaning].filters
            keep, dropped = _filter(src_lens, tgt_lens, corpus.cleaning)
            dropped.update(filters.narrow(src_text, tgt_text, keep))
            if corpus.cleaning.dedup:
                digests = _pair_digests(itertools.compress(zip(src_text, tgt_text), keep))
        src = _flatten(src_ids, src_lens, keep, self.dtype)
        src_lens = src_lens[keep]
        if prefix:
            starts = np.cumsum(src_lens) - src_lens
            src = np.insert(src, np.repeat(starts, len(prefix)), np.tile(np.array(prefix, self.dtype), len(src_lens)))
            src_lens = src_lens + len(prefix)
        return _EncodedChunk(
            src, src_lens, _flatten(tgt_ids, tgt_lens, keep, self.dtype), tgt_lens[keep], dropped, digests
        )


_worker_encoder: _ChunkEncoder | None = None


def _init_worker(model: bytes, cleanings: list[_Cleaning]) -> None:
    global _worker_encoder
    _worker_encoder = _ChunkEncoder(model, cleanings)  # the model is loaded once per worker


def _encode_in_worker(task: _Task) -> _EncodedChunk:
    assert _worker_encoder is not None, "worker used without _init_worker"
    return _worker_encoder(task)


def _filter(src_lens: np.ndarray, tgt_lens: np.ndarray, cfg: CleaningConfig) -> tuple[np.ndarray, dict[str, int]]:
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
    digests = b"".join(hashlib.blake2b(f"{len(src)}:{src}{tgt}".encode(), digest_size=8).digest() for src, tgt in pairs)
    return np.frombuffer(digests, dtype=np.uint64)


def _drop_duplicates(chunk: _EncodedChunk, seen: DigestSet) -> _EncodedChunk:
    fresh = seen.add_new(chunk.digests)
    if fresh.all():
        return replace(chunk, dropped={**chunk.dropped, "duplicate": 0})
    return _EncodedChunk(
        chunk.src[np.repeat(fresh, chunk.src_lens)],
        chunk.src_lens[fresh],
        chunk.tgt[np.repeat(fresh, chunk.tgt_lens)],
        chunk.tgt_lens[fresh],
        {**chunk.dropped, "duplicate": int((~fresh).sum())},
        chunk.digests[fresh],
    )


class DigestSet:
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
