"""Binary format: write/read round trip, dtype choice, atomic writer, manifest checks, collate values."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from mtkit.corpus.binarized import (
    BinaryWriter,
    MixedData,
    ParallelData,
    collate,
    data_paths,
    read_manifest,
    token_dtype,
)
from mtkit.errors import UserError

SRC = [[5, 6, 7], [], [9], [10, 11, 12, 13]]
TGT = [[20], [21, 22], [], [23, 24, 25]]


def write_dataset(path: Path, src: list[list[int]], tgt: list[list[int]], vocab_size: int = 100) -> Path:
    """A data directory with one split `train`, written the way preprocess writes it."""
    path.mkdir(parents=True, exist_ok=True)
    for lang, sequences in (("en", src), ("de", tgt)):
        with BinaryWriter(path, "train", lang, vocab_size) as writer:
            writer.write(sequences[:2])
            writer.write(sequences[2:])
    manifest = {
        "format": "mtkit-data",
        "version": 1,
        "source_lang": "en",
        "target_lang": "de",
        "vocab_size": vocab_size,
        "splits": {"train": {"pairs": len(src)}},
    }
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def test_round_trip_with_empty_sequences(tmp_path: Path) -> None:
    data = ParallelData.open(write_dataset(tmp_path / "d", SRC, TGT), "train", "en", "de")
    assert len(data) == 4
    assert data.src_lens.tolist() == [3, 0, 1, 4] and data.tgt_lens.tolist() == [1, 2, 0, 3]
    assert [data.src(i).tolist() for i in range(4)] == SRC
    assert [data.tgt(i).tolist() for i in range(4)] == TGT
    bin_path, idx_path = data_paths(tmp_path / "d", "train", "en")
    assert bin_path.stat().st_size == 8 * 2 and idx_path.stat().st_size == 5 * 8


def test_reverse_direction_reads_the_other_side(tmp_path: Path) -> None:
    data = ParallelData.open(write_dataset(tmp_path / "d", SRC, TGT), "train", "de", "en")
    assert data.src(0).tolist() == TGT[0] and data.tgt(0).tolist() == SRC[0]


def test_large_vocabulary_uses_int32(tmp_path: Path) -> None:
    assert token_dtype(65535) == np.uint16 and token_dtype(65536) == np.int32
    src = [[70_000, 65_535, 1]]
    data = ParallelData.open(write_dataset(tmp_path / "d", src, [[99_999]], vocab_size=100_000), "train", "en", "de")
    assert data.src(0).tolist() == src[0] and data.tgt(0).tolist() == [99_999]


def test_writer_leaves_nothing_on_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        with BinaryWriter(tmp_path, "train", "en", 100) as writer:
            writer.write([[1, 2]])
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_writer_close_returns_count(tmp_path: Path) -> None:
    writer = BinaryWriter(tmp_path, "valid", "de", 100)
    writer.write_flat(np.array([4, 5, 6], dtype=np.uint16), np.array([2, 0, 1]))
    assert writer.close() == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["valid.de.bin", "valid.de.idx"]


def test_manifest_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="manifest.json: no such file"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(UserError, match="manifest.json: invalid JSON"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text('{"format": "other"}')
    with pytest.raises(UserError, match="manifest.json: not an mtkit-data"):
        read_manifest(tmp_path)


def test_open_errors(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "d", SRC, TGT)
    with pytest.raises(UserError, match="no split 'valid' \\(has train\\)"):
        ParallelData.open(path, "valid", "en", "de")
    with pytest.raises(UserError, match="holds en-de, not en-fr"):
        ParallelData.open(path, "train", "en", "fr")
    bin_path, _ = data_paths(path, "train", "de")
    bin_path.write_bytes(bin_path.read_bytes()[:-2])
    with pytest.raises(UserError, match="train.de.bin: size"):
        ParallelData.open(path, "train", "en", "de")
    bin_path.unlink()
    with pytest.raises(UserError, match="train.de.bin: no such file"):
        ParallelData.open(path, "train", "en", "de")


def test_collate_hand_checked(tmp_path: Path) -> None:
    data = ParallelData.open(write_dataset(tmp_path / "d", SRC, TGT), "train", "en", "de")
    batch = collate(data, np.array([3, 1, 2]))
    assert batch.src.tolist() == [[10, 11, 12, 13, 3], [3, 0, 0, 0, 0], [9, 3, 0, 0, 0]]
    assert batch.tgt_in.tolist() == [[2, 23, 24, 25], [2, 21, 22, 0], [2, 0, 0, 0]]
    assert batch.tgt_out.tolist() == [[23, 24, 25, 3], [21, 22, 3, 0], [3, 0, 0, 0]]
    assert (batch.src_tokens, batch.tgt_tokens) == (5 + 1 + 2, 4 + 3 + 1)
    assert batch.src.dtype == torch.int64
    moved = batch.to("cpu")
    assert torch.equal(moved.tgt_out, batch.tgt_out) and moved.tgt_tokens == batch.tgt_tokens


def test_mixed_data_gathers_each_sentence_from_its_own_split(tmp_path: Path) -> None:
    """A batch across corpora equals collating the same sentences of one split that holds them all."""
    first = ParallelData.open(write_dataset(tmp_path / "a", SRC, TGT), "train", "en", "de")
    second_src, second_tgt = [[40, 41], [42], [43, 44, 45, 46, 47]], [[50], [51, 52, 53], [54]]
    second = ParallelData.open(write_dataset(tmp_path / "b", second_src, second_tgt), "train", "en", "de")
    whole = ParallelData.open(write_dataset(tmp_path / "c", SRC + second_src, TGT + second_tgt), "train", "en", "de")
    mixed = MixedData([first, second])
    assert len(mixed) == 7 and mixed.src_lens.tolist() == whole.src_lens.tolist()
    assert [mixed.tgt(i).tolist() for i in range(7)] == [whole.tgt(i).tolist() for i in range(7)]
    for indices in ([6, 0, 4, 4, 1], [5, 4], [2, 3], []):
        a, b = collate(mixed, np.array(indices, np.int64)), collate(whole, np.array(indices, np.int64))
        assert a.src.tolist() == b.src.tolist() and a.tgt_out.tolist() == b.tgt_out.tolist()
        assert (a.src_tokens, a.tgt_tokens) == (b.src_tokens, b.tgt_tokens)


def test_collate_matches_a_loop_on_multi30k(multi30k_data: Path) -> None:
    data = ParallelData.open(multi30k_data, "train", "en", "de")
    indices = np.random.default_rng(0).choice(len(data), 64, replace=False)
    batch = collate(data, indices, pad_id=0, bos_id=2, eos_id=3)
    assert batch.src.shape == (64, int(data.src_lens[indices].max()) + 1)
    assert batch.tgt_in.shape == batch.tgt_out.shape == (64, int(data.tgt_lens[indices].max()) + 1)
    for row, i in enumerate(indices):
        src, tgt = data.src(i).tolist(), data.tgt(i).tolist()
        assert batch.src[row, : len(src) + 1].tolist() == src + [3]
        assert batch.tgt_in[row, : len(tgt) + 1].tolist() == [2] + tgt
        assert batch.tgt_out[row, : len(tgt) + 1].tolist() == tgt + [3]
    assert batch.src_tokens == int((batch.src != 0).sum())
    assert batch.tgt_tokens == int((batch.tgt_out != 0).sum())


@pytest.mark.parametrize(("start", "group_size"), [(0, 1), (3, 4)])  # 4 does not divide the rest: a short last group
def test_prefetched_groups_equal_collating_in_the_loop(small_data: Path, start: int, group_size: int) -> None:
    """The background collation yields the same batches in the same order as collating on the caller's thread,
    from any resume position; closing it early stops its thread."""
    import threading

    from mtkit.corpus.batching import epoch_batches
    from mtkit.corpus.binarized import prefetch_groups

    data = ParallelData.open(small_data, "train", "en", "de")
    batches = epoch_batches(data.src_lens, data.tgt_lens, 1024, seed=1, epoch=2)
    expected = [
        [collate(data, idx) for idx in batches[p : p + group_size]] for p in range(start, len(batches), group_size)
    ]
    got = list(prefetch_groups(data, batches, start, group_size, torch.device("cpu")))
    assert len(got) == len(expected) > 3 and len(got[-1]) == len(expected[-1])
    for got_group, expected_group in zip(got, expected):
        for a, b in zip(got_group, expected_group, strict=True):
            assert (a.src_tokens, a.tgt_tokens) == (b.src_tokens, b.tgt_tokens)
            for name in ("src", "tgt_in", "tgt_out"):
                assert torch.equal(getattr(a, name), getattr(b, name)), name
    groups = prefetch_groups(data, batches, start, group_size, torch.device("cpu"), depth=1)
    next(groups)
    groups.close()
    assert not any(t.name == "mtkit-collate" for t in threading.enumerate())
