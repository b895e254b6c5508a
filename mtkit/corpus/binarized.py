"""Binarized parallel data: streaming writer, memory-mapped reader, manifest check, batch collation.

Per split and side, `{split}.{lang}.bin` holds all token ids back to back (uint16 when the vocabulary
fits, else int32; no bos/eos stored) and `{split}.{lang}.idx` holds n+1 int64 offsets into it.
`manifest.json` (written by preprocess) describes the directory. Nothing here tokenizes or trains.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np
import torch

from mtkit.corpus.batching import round_up
from mtkit.errors import UserError, check
from mtkit.file_names import MANIFEST_NAME
from mtkit.files import atomic_write
from mtkit.readahead import ReadAhead

# (source ids, target ids, their indices, batch position) -> the same sentences segmented again
Resample = Callable[[list[np.ndarray], list[np.ndarray], np.ndarray, int], tuple[list[np.ndarray], list[np.ndarray]]]
FORMAT = "mtkit-data"
VERSION = 1


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 halves the file size whenever every id fits."""
    return np.dtype(np.uint16) if vocab_size <= 65535 else np.dtype(np.int32)


def data_paths(data_dir: str | Path, split: str, lang: str) -> tuple[Path, Path]:
    """The (.bin, .idx) paths of one split and side."""
    return Path(data_dir) / f"{split}.{lang}.bin", Path(data_dir) / f"{split}.{lang}.idx"


class BinaryWriter:
    """Streaming appender for one split and side; both files appear under their names on close()."""

    def __init__(self, data_dir: str | Path, split: str, lang: str, vocab_size: int) -> None:
        self.dtype = token_dtype(vocab_size)
        self.count = 0
        self._offset = 0
        self._stack = contextlib.ExitStack()
        bin_path, idx_path = data_paths(data_dir, split, lang)
        self._bin = self._stack.enter_context(atomic_write(bin_path, "wb"))
        self._idx = self._stack.enter_context(atomic_write(idx_path, "wb"))
        self._idx.write(np.zeros(1, np.int64).tobytes())

    def write(self, sequences: list[list[int]]) -> None:
        """Append id sequences (without bos/eos)."""
        lens = np.fromiter(map(len, sequences), np.int64, len(sequences))
        flat = np.fromiter((i for seq in sequences for i in seq), self.dtype, int(lens.sum()))
        self.write_flat(flat, lens)

    def write_flat(self, tokens: np.ndarray, lens: np.ndarray) -> None:
        """Append sequences given as one flat id array and their lengths (the fast path)."""
        if int(lens.sum()) != len(tokens):
            raise ValueError(f"lengths add up to {int(lens.sum())} tokens, got {len(tokens)}")
        offsets = self._offset + np.cumsum(lens, dtype=np.int64)
        self._bin.write(np.ascontiguousarray(tokens, dtype=self.dtype).tobytes())
        self._idx.write(offsets.tobytes())
        self._offset = int(offsets[-1]) if len(offsets) else self._offset
        self.count += len(lens)

    def close(self) -> int:
        """Flush, fsync and rename both files into place; returns the sequence count."""
        self._stack.close()
        return self.count

    def __enter__(self) -> BinaryWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        else:
            self._stack.__exit__(kind, exc, tb)  # removes the temporary files


def read_manifest(data_dir: str | Path) -> dict:
    """The manifest of a preprocessed directory; missing or invalid is a UserError naming it."""
    path = Path(data_dir) / MANIFEST_NAME
    check(path.is_file(), f"{path}: no such file (run `mtkit preprocess` to create {data_dir})")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: invalid JSON ({exc})") from None
    check(
        isinstance(manifest, dict) and manifest.get("format") == FORMAT and manifest.get("version") == VERSION,
        f"{path}: not an {FORMAT} version {VERSION} manifest",
    )
    return manifest


def split_languages(manifest: dict, split: str) -> tuple[str, str]:
    """(source, target) of one split: its own entry of split_langs, else (data written before several language
    pairs existed) the manifest's pair."""
    langs = manifest.get("split_langs", {}).get(split)
    return (langs[0], langs[1]) if langs else (manifest["source_lang"], manifest["target_lang"])


def training_corpora(manifest: dict) -> dict[str, dict]:
    """Corpus name -> its manifest entry (split, source_lang, target_lang, weight, tag, counts); a directory written
    before corpora existed has one, "train"."""
    if "corpora" in manifest:
        return manifest["corpora"]
    if "train" not in manifest["splits"]:
        return {}
    return {
        "train": {
            "split": "train",
            "source_lang": manifest["source_lang"],
            "target_lang": manifest["target_lang"],
            "weight": 1.0,
            "tag": None,
            **manifest["splits"]["train"],
        }
    }


def valid_splits(manifest: dict) -> dict[str, str]:
    """Language pair "src-tgt" -> its valid split."""
    if "valid_splits" in manifest:
        return manifest["valid_splits"]
    return {f"{manifest['source_lang']}-{manifest['target_lang']}": "valid"} if "valid" in manifest["splits"] else {}


class ParallelData:
    """One memory-mapped split: sentence i is `src(i)` / `tgt(i)`; lengths exclude bos/eos."""

    def __init__(self, src: tuple[np.ndarray, np.ndarray], tgt: tuple[np.ndarray, np.ndarray]) -> None:
        self._src_tokens, self._src_offsets = src
        self._tgt_tokens, self._tgt_offsets = tgt
        self.src_lens = np.diff(self._src_offsets).astype(np.int32)
        self.tgt_lens = np.diff(self._tgt_offsets).astype(np.int32)

    @classmethod
    def open(cls, data_dir: str | Path, split: str, src_lang: str, tgt_lang: str) -> ParallelData:
        """Map one split of a preprocessed directory; either translation direction may be read."""
        manifest = read_manifest(data_dir)
        held = split_languages(manifest, split)
        check(
            {src_lang, tgt_lang} == set(held) and src_lang != tgt_lang,
            f"{data_dir}: holds {held[0]}-{held[1]}, not {src_lang}-{tgt_lang}",
        )
        splits = manifest["splits"]
        check(split in splits, f"{data_dir}: no split {split!r} (has {', '.join(sorted(splits))})")
        dtype = token_dtype(manifest["vocab_size"])
        pairs = splits[split]["pairs"]
        src = map_side(data_dir, split, src_lang, dtype, pairs)
        tgt = map_side(data_dir, split, tgt_lang, dtype, pairs)
        return cls(src, tgt)

    def __len__(self) -> int:
        return len(self.src_lens)

    def src(self, i: int) -> np.ndarray:
        return np.asarray(self._src_tokens[self._src_offsets[i] : self._src_offsets[i + 1]])

    def tgt(self, i: int) -> np.ndarray:
        return np.asarray(self._tgt_tokens[self._tgt_offsets[i] : self._tgt_offsets[i + 1]])

    def gather(self, side: str, indices: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, column, id) of every token of sentences `indices` (of lengths `lens`) on side "src" or "tgt"."""
        if side == "src":
            return _gather(self._src_tokens, self._src_offsets, indices, lens)
        return _gather(self._tgt_tokens, self._tgt_offsets, indices, lens)


class MixedData:
    """Several splits (the training corpora) seen as one: sentence `starts[k] + i` is sentence i of part k; lengths
    concatenated, so that batching and collate treat it as one ParallelData."""

    def __init__(self, parts: list[ParallelData]) -> None:
        self.parts = list(parts)
        self.starts = np.cumsum([0] + [len(part) for part in self.parts])
        self.src_lens = np.concatenate([part.src_lens for part in self.parts])
        self.tgt_lens = np.concatenate([part.tgt_lens for part in self.parts])

    def __len__(self) -> int:
        return len(self.src_lens)

    def _locate(self, i: int) -> tuple[ParallelData, int]:
        k = int(np.searchsorted(self.starts, i, side="right")) - 1
        return self.parts[k], i - int(self.starts[k])

    def src(self, i: int) -> np.ndarray:
        part, local = self._locate(i)
        return part.src(local)

    def tgt(self, i: int) -> np.ndarray:
        part, local = self._locate(i)
        return part.tgt(local)

    def gather(self, side: str, indices: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As ParallelData.gather: each part gathers its own sentences into their places."""
        part = np.searchsorted(self.starts, indices, side="right") - 1
        if not len(indices) or (part == part[0]).all():  # a batch of one corpus: no scatter
            k = int(part[0]) if len(indices) else 0
            return self.parts[k].gather(side, indices - self.starts[k], lens)
        rows, cols = _positions(lens)
        ids = np.empty(len(cols), self.parts[0]._src_tokens.dtype)
        token_part = np.repeat(part, lens)
        for k in np.unique(part):
            chosen = part == k
            ids[token_part == k] = self.parts[k].gather(side, indices[chosen] - self.starts[k], lens[chosen])[2]
        return rows, cols, ids


def map_side(data_dir: str | Path, split: str, lang: str, dtype: np.dtype, pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, offsets) of one side, memory-mapped, after checking that the sizes agree."""
    bin_path, idx_path = data_paths(data_dir, split, lang)
    for path in (bin_path, idx_path):
        check(path.is_file(), f"{path}: no such file (incomplete data directory; run `mtkit preprocess` again)")
    check(
        idx_path.stat().st_size == (pairs + 1) * 8,
        f"{idx_path}: expected {pairs + 1} offsets as in {MANIFEST_NAME}, file size {idx_path.stat().st_size}",
    )
    offsets = np.memmap(idx_path, dtype=np.int64, mode="r")
    n_tokens = int(offsets[-1])
    check(
        bin_path.stat().st_size == n_tokens * dtype.itemsize and offsets[0] == 0,
        f"{bin_path}: size {bin_path.stat().st_size} does not match {n_tokens} tokens in {idx_path}",
    )
    tokens = np.memmap(bin_path, dtype=dtype, mode="r") if n_tokens else np.zeros(0, dtype)
    return tokens, offsets


@dataclass
class Batch:
    """A padded batch: src [B, S] = tokens+eos, tgt_in [B, T] = bos+tokens, tgt_out [B, T] = tokens+eos."""

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    src_tokens: int  # non-pad entries of src (eos included)
    tgt_tokens: int  # non-pad entries of tgt_out (eos included): the loss normalizer

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """The same batch on `device`."""
        return Batch(
            self.src.to(device, non_blocking=non_blocking),
            self.tgt_in.to(device, non_blocking=non_blocking),
            self.tgt_out.to(device, non_blocking=non_blocking),
            self.src_tokens,
            self.tgt_tokens,
        )

    def pin_memory(self) -> Batch:
        """The same batch in page-locked host memory, so that `.to(cuda, non_blocking=True)` is asynchronous."""
        return Batch(
            self.src.pin_memory(), self.tgt_in.pin_memory(), self.tgt_out.pin_memory(), self.src_tokens, self.tgt_tokens
        )


def collate(
    data: ParallelData | MixedData,
    indices: np.ndarray,
    pad_id: int = 0,
    bos_id: int = 2,
    eos_id: int = 3,
    pad_multiple: int = 1,
) -> Batch:
    """Gather sentences `indices` into padded int64 tensors with one vectorized fill per side; each padded
    length rounded up to a multiple of `pad_multiple` (a bounded set of shapes for compiled GPU kernels)."""
    indices = np.asarray(indices, dtype=np.int64)
    src_lens = data.src_lens[indices].astype(np.int64)
    tgt_lens = data.tgt_lens[indices].astype(np.int64)
    return _padded_batch(
        data.gather("src", indices, src_lens),
        src_lens,
        data.gather("tgt", indices, tgt_lens),
        tgt_lens,
        (pad_id, bos_id, eos_id),
        pad_multiple,
    )


def collate_sequences(
    src: list[np.ndarray],
    tgt: list[np.ndarray],
    pad_id: int = 0,
    bos_id: int = 2,
    eos_id: int = 3,
    pad_multiple: int = 1,
) -> Batch:
    """collate's batch from id sequences given one by one (sentences segmented again for subword
    regularization)."""
    sides = []
    for seqs in (src, tgt):
        lens = np.fromiter(map(len, seqs), np.int64, len(seqs))
        rows, cols = _positions(lens)
        flat = np.concatenate(seqs) if seqs else np.zeros(0, np.int64)
        sides.append(((rows, cols, flat), lens))
    return _padded_batch(*sides[0], *sides[1], (pad_id, bos_id, eos_id), pad_multiple)


def _padded_batch(
    src_ids: tuple[np.ndarray, np.ndarray, np.ndarray],
    src_lens: np.ndarray,
    tgt_ids: tuple[np.ndarray, np.ndarray, np.ndarray],
    tgt_lens: np.ndarray,
    token_ids: tuple[int, int, int],
    pad_multiple: int,
) -> Batch:
    """The padded tensors from each side's (row, column, id) of every token and its lengths."""
    pad_id, bos_id, eos_id = token_ids
    (src_rows, src_cols, src_flat), (tgt_rows, tgt_cols, tgt_flat) = src_ids, tgt_ids
    n = len(src_lens)
    rows = np.arange(n)
    src = np.full((n, _padded_width(src_lens, pad_multiple)), pad_id, dtype=np.int64)  # [B, S]
    src[src_rows, src_cols] = src_flat
    src[rows, src_lens] = eos_id
    width = _padded_width(tgt_lens, pad_multiple)
    tgt_in = np.full((n, width), pad_id, dtype=np.int64)  # [B, T]
    tgt_in[:, 0] = bos_id
    tgt_in[tgt_rows, tgt_cols + 1] = tgt_flat
    tgt_out = np.full((n, width), pad_id, dtype=np.int64)  # [B, T]
    tgt_out[tgt_rows, tgt_cols] = tgt_flat
    tgt_out[rows, tgt_lens] = eos_id
    return Batch(
        torch.from_numpy(src),
        torch.from_numpy(tgt_in),
        torch.from_numpy(tgt_out),
        src_tokens=int(src_lens.sum()) + n,
        tgt_tokens=int(tgt_lens.sum()) + n,
    )


def _padded_width(lens: np.ndarray, multiple: int) -> int:
    """The longest sentence + its eos (or bos), rounded up to `multiple` (as the batch budget counts it)."""
    return int(round_up(int(lens.max(initial=0)) + 1, multiple))


def _gather(
    tokens: np.ndarray, offsets: np.ndarray, indices: np.ndarray, lens: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, column, id) of every token of the chosen sentences, without a Python loop."""
    rows, cols = _positions(lens)
    positions = np.repeat(offsets[indices], lens) + cols
    return rows, cols, tokens[positions]


def _positions(lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of every token of sentences of lengths `lens`, laid out one row per sentence."""
    rows = np.repeat(np.arange(len(lens)), lens)
    starts = np.cumsum(lens) - lens  # where each sentence begins in the gathered order
    return rows, np.arange(int(lens.sum())) - np.repeat(starts, lens)


BY_LENGTH_SLACK = 1.25  # a micro-batch costs more than a quarter of a batch's padding: typos' extra pieces stay


def by_length(src: list[np.ndarray], tgt: list[np.ndarray], budget: int) -> list[list[int]]:
    """The pairs as micro-batches of at most `budget` padded tokens (pairs x longest side), shortest first; all of
    them in their order as one when they fit in BY_LENGTH_SLACK x the budget."""
    width = [max(len(s), len(t)) for s, t in zip(src, tgt)]
    if len(width) * max(width, default=0) <= BY_LENGTH_SLACK * budget:
        return [list(range(len(width)))]
    parts: list[list[int]] = []
    current: list[int] = []
    for i in sorted(range(len(width)), key=lambda i: (width[i], i)):
        if current and (len(current) + 1) * width[i] > budget:
            parts.append(current)
            current = []
        current.append(i)
    return parts + [current]


def prefetch_groups(
    data: ParallelData | MixedData,
    batches: list[np.ndarray],
    start: int,
    group_size: int,
    device: torch.device,
    depth: int = 2,
    pad_multiple: int = 1,
    token_ids: tuple[int, int, int] = (0, 2, 3),
    resample: Resample | None = None,
    regroup: bool = False,
) -> Iterator[list[Batch]]:
    """`batches[start:]` in groups of `group_size`, collated on the device, in order.

    A background thread collates the next `depth` groups while the caller computes (pinned when the device is
    CUDA, then copied with non_blocking=True), so the step never waits for numpy gathers or a blocking copy.
    Closing the generator stops the thread. Collation draws only from seeds of its arguments (`resample`: the
    sentences of batch `position` segmented again, mtkit.corpus.subword_sampling), so the groups are the same as
    collating on the caller's thread. `token_ids`: the model's pad, decoder start and eos ids. `regroup`: a
    resampled batch that grew past 1.25 times its stored padded size is cut into micro-batches by length.
    """
    pin = device.type == "cuda"

    def one(indices: np.ndarray, position: int) -> list[Batch]:
        if resample is None:
            return [collate(data, indices, *token_ids, pad_multiple=pad_multiple)]
        stored_src, stored_tgt = [data.src(i) for i in indices], [data.tgt(i) for i in indices]
        src, tgt = resample(stored_src, stored_tgt, indices, position)
        if not regroup:
            return [collate_sequences(src, tgt, *token_ids, pad_multiple=pad_multiple)]
        # `regroup` (the modifiers): a batch whose lines grew past its stored lengths (capitals take ~4x the pieces,
        # a merged line 2-3x) is cut again by length into micro-batches of at most its stored padded size; padded
        # together, a few such lines made every line that long. The update divides by all target tokens either way.
        widest = max(max(map(len, stored_src)), max(map(len, stored_tgt)))
        parts = by_length(src, tgt, len(indices) * widest)
        return [
            collate_sequences([src[i] for i in part], [tgt[i] for i in part], *token_ids, pad_multiple=pad_multiple)
            for part in parts
        ]

    def groups() -> Iterator[list[Batch]]:
        for position in range(start, len(batches), group_size):
            group = [
                batch
                for offset, idx in enumerate(batches[position : position + group_size])
                for batch in one(idx, position + offset)
            ]
            yield [batch.pin_memory() for batch in group] if pin else group

    ahead = ReadAhead(groups(), depth, "mtkit-collate")
    try:
        for group in ahead:
            yield [batch.to(device, non_blocking=pin) for batch in group]  # type: ignore[attr-defined]
    finally:
        ahead.close()
