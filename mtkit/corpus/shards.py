"""The join of a sharded preprocess run (`mtkit preprocess --shard K/N` writes DATA.shard-K-of-N/): the check that the
set is complete and made alike, then DATA as one run writes it, atomically: each training split as its shards' pairs
end to end, less those an earlier shard kept (as one run's dedup drops them), the drop counts summed, valid/test and
spm.model from shard 1, manifest.json as one run writes it. Tokenizes nothing; imports nothing of mtkit.bulk.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from mtkit.corpus.binarized import (
    BinaryWriter,
    data_paths,
    map_side,
    read_manifest,
    split_languages,
    token_dtype,
)
from mtkit.corpus.preprocess import DIGESTS, DROP_REASONS, DigestSet
from mtkit.corpus.sharding import check_complete, find_set, set_size, shard_range
from mtkit.errors import check
from mtkit.file_names import MANIFEST_NAME, SPM_NAME
from mtkit.files import atomic_directory, atomic_write, write_text

BLOCK_PAIRS = 1 << 20  # pairs copied at a time: memory stays bounded whatever the corpus
# What every shard of a set shares with shard 1, as its manifest spells it (the options: all but `workers`, which
# changes no byte of the data; the joined manifest records shard 1's).
ALIKE = ("format", "version", "source_lang", "target_lang", "vocab_size", "spm_sha256", "pairs", "language_tokens")
ALIKE += ("valid_splits", "split_langs")
NAMES = {"spm_sha256": "sentencepiece model"}
PER_SHARD_OPTIONS = ("workers",)


def find_shards(out_dir: Path) -> dict[tuple[int, int], Path]:
    """(K, N) -> DATA.shard-K-of-N of every finished shard (one with a manifest.json) of DATA, of any set size."""
    return {key: path for key, path in find_set(out_dir).items() if (path / MANIFEST_NAME).is_file()}


def check_shards(out_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(directory, manifest) of shards 1..N of DATA, each made as shard 1 was, over its own pairs; a one-line error
    names the shards missing or the first difference."""
    found = find_shards(out_dir)
    pattern = f"{out_dir.name}.shard-K-of-N/ with a {MANIFEST_NAME} beside it"
    count = set_size(out_dir, found, "join", "shard directories", pattern)
    check_complete(
        out_dir, count, {index for index, size in found if size == count}, "join", "preprocess it", by_name=True
    )
    shards = [(found[index, count], read_manifest(found[index, count])) for index in range(1, count + 1)]
    first_dir, first = shards[0]
    for index, (directory, manifest) in enumerate(shards, start=1):
        record = manifest.get("shard")
        check(
            isinstance(record, dict) and (record.get("index"), record.get("count")) == (index, count),
            f"{directory}: its {MANIFEST_NAME} is not shard {index} of {count}'s",
        )
        differs = _differences(first, manifest)
        check(
            not differs,
            f"{directory}: made with another {', '.join(differs)} than shard 1 ({first_dir.name}); preprocess it "
            "again as the others were",
        )
        for split, (start, end, total) in record["lines"].items():
            check(
                [start, end] == list(shard_range(total, index, count, record["chunk_pairs"])),
                f"{directory}: {split} pairs {start}-{end} are not shard {index}'s of {count}",
            )
    return shards


def _differences(first: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """What `other` was made with otherwise than `first`, named for a message."""
    differs = [NAMES.get(key, key) for key in ALIKE if first.get(key) != other.get(key)]
    options, others = first["options"], other["options"]
    differs += [
        f"option {key}"
        for key in sorted(set(options) | set(others))
        if key not in PER_SHARD_OPTIONS and options.get(key) != others.get(key)
    ]
    mine, theirs = first["shard"], other["shard"]
    if mine.get("chunk_pairs") != theirs.get("chunk_pairs"):
        differs.append("chunk size")
    if {name: lines[2] for name, lines in mine["lines"].items()} != {
        name: lines[2] for name, lines in theirs["lines"].items()
    }:
        differs.append("training corpora (their pair counts differ)")
    return differs


def join_shards(out_dir: Path, keep_shards: bool = False) -> dict[str, Any]:
    """`mtkit preprocess --join --out DATA`: check the set and write DATA as one run over all the pairs writes it
    (atomically); then, unless `keep_shards`, remove the shards' directories. Returns the manifest."""
    out_dir = Path(out_dir)
    check(
        not out_dir.exists()
        or (out_dir.is_dir() and (not any(out_dir.iterdir()) or (out_dir / MANIFEST_NAME).is_file())),
        f"{out_dir}: exists and is not a preprocessed data directory; choose another output directory",
    )
    shards = check_shards(out_dir)
    first_dir, first = shards[0]
    training = first["shard"]["lines"]
    with atomic_directory(out_dir) as tmp:
        _copy(first_dir / SPM_NAME, tmp / SPM_NAME)
        splits = {}
        for name, stats in first["splits"].items():
            langs = split_languages(first, name)
            if name in training:
                splits[name] = _join_split(name, langs, shards, first["vocab_size"], tmp)
                continue
            for lang in langs:  # valid and test: shard 1 wrote them whole
                for path in data_paths(first_dir, name, lang):
                    _copy(path, tmp / path.name)
            splits[name] = stats
        manifest = {key: value for key, value in first.items() if key != "shard"}
        manifest["splits"] = splits
        manifest["corpora"] = {name: {**entry, **splits[entry["split"]]} for name, entry in first["corpora"].items()}
        write_text(tmp / MANIFEST_NAME, json.dumps(manifest, indent=2) + "\n")
    if not keep_shards:
        for directory, _ in shards:
            shutil.rmtree(directory)
    return manifest


def _join_split(
    name: str, langs: tuple[str, str], shards: list[tuple[Path, dict[str, Any]]], vocab_size: int, out_dir: Path
) -> dict[str, Any]:
    """One training split written as its shards' pairs in order, a pair whose digest an earlier shard kept dropped
    (each shard already kept only the first of its own); returns its statistics, as one run counts them."""
    dtype = token_dtype(vocab_size)
    seen = DigestSet() if (shards[0][0] / DIGESTS.format(split=name)).is_file() else None
    stats = {"pairs": 0, "input_pairs": 0, "src_tokens": 0, "tgt_tokens": 0}
    dropped = dict.fromkeys(DROP_REASONS, 0)
    with (
        BinaryWriter(out_dir, name, langs[0], vocab_size) as src_out,
        BinaryWriter(out_dir, name, langs[1], vocab_size) as tgt_out,
    ):
        for directory, manifest in shards:
            own = manifest["splits"][name]
            stats["input_pairs"] += own["input_pairs"]
            for reason, count in own["dropped"].items():
                dropped[reason] += count
            pairs = own["pairs"]
            src, tgt = (map_side(directory, name, lang, dtype, pairs) for lang in langs)
            digests = _digests(directory, name, pairs) if seen is not None else None  # None: not deduplicated
            for begin in range(0, pairs, BLOCK_PAIRS):
                stop = min(begin + BLOCK_PAIRS, pairs)
                keep = np.ones(stop - begin, bool) if digests is None else seen.add_new(digests[begin:stop])
                dropped["duplicate"] += int((~keep).sum())
                stats["src_tokens"] += _copy_pairs(src_out, *src, begin, stop, keep)
                stats["tgt_tokens"] += _copy_pairs(tgt_out, *tgt, begin, stop, keep)
        stats["pairs"] = src_out.count
    return {**stats, "dropped": dropped}


def _digests(directory: Path, name: str, pairs: int) -> np.ndarray:
    """A shard's kept pairs' digests, checked to be one per pair."""
    path = directory / DIGESTS.format(split=name)
    size = path.stat().st_size if path.is_file() else None
    check(
        size == pairs * 8,
        f"{path}: {'missing' if size is None else f'{size} bytes'}, {pairs} digests expected; preprocess that shard "
        "again",
    )
    return np.fromfile(path, np.uint64) if pairs else np.zeros(0, np.uint64)


def _copy_pairs(
    out: BinaryWriter, tokens: np.ndarray, offsets: np.ndarray, begin: int, stop: int, keep: np.ndarray
) -> int:
    """Append pairs [begin, stop) of one side, those `keep` marks; returns the tokens written."""
    lens = np.diff(offsets[begin : stop + 1])
    flat = np.asarray(tokens[offsets[begin] : offsets[stop]])
    if not keep.all():
        flat, lens = flat[np.repeat(keep, lens)], lens[keep]
    out.write_flat(flat, lens)
    return len(flat)


def _copy(source: Path, target: Path) -> None:
    """A file copied as preprocess writes its own: synced, then renamed into place."""
    with open(source, "rb") as part, atomic_write(target, "wb") as copy:
        shutil.copyfileobj(part, copy, 1 << 20)
