"""Bulk jobs over pairs sharded over processes (`distill`, `score-pairs`, `filter-pairs` with `--shard K/N`), each
run as three shards, one after the other, with the tiny models of tests/conftest.py: the last shard merges the set
into what one process writes. Apart from tests/bulk/test_shards.py so that the two test processes share them out."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtkit.bulk.shard_sets import merge_lock
from tests.bulk.test_shards import mtkit_ok, run_three_shards, shards_left
from tests.conftest import read_gz_lines, run_mtkit_in_process


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory, multi30k: Path) -> tuple[Path, Path]:
    """24 of the train pairs overfit_run and de_en_run memorized, the last 6 with the target of another sentence."""
    folder = tmp_path_factory.mktemp("pairs")
    en, de = read_gz_lines(multi30k / "train.en.gz", 24), read_gz_lines(multi30k / "train.de.gz", 24)
    de = de[:18] + de[19:] + de[18:19]
    (folder / "corpus.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    (folder / "corpus.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    return folder / "corpus.en", folder / "corpus.de"


def test_distill_shards_on_ctranslate2_give_its_batches_alike(
    overfit_run: Path, pairs: tuple[Path, Path], tmp_path: Path
) -> None:
    """CTranslate2's own beam search, whose lines can depend on the batch: shards on the chunks of 8 lines."""
    common = ("distill", overfit_run, "-i", pairs[0], "--beam", "2", "--device", "cpu", "--chunk-lines", "8")
    mtkit_ok(*common, "-o", tmp_path / "whole")
    run_three_shards(*common, "-o", tmp_path / "student")
    for lang in ("de", "en"):
        assert (tmp_path / f"student.{lang}").read_bytes() == (tmp_path / f"whole.{lang}").read_bytes()


def test_score_pairs_shards_write_the_scores_one_process_writes(
    tiny_run: Path, pairs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mtkit.bulk.forced.CHUNK_PAIRS", 5)  # 1,000 pairs made small: chunks of 5 pairs
    common = ("score-pairs", tiny_run, "--source", pairs[0], "--target", pairs[1], "--json", "--device", "cpu")
    mtkit_ok(*common, "-o", tmp_path / "whole.jsonl")
    printed = run_three_shards(*common, "-o", tmp_path / "scores.jsonl")
    assert "shard 1/3: lines 1-5" in printed[0] and "merged into" in printed[2]
    assert (tmp_path / "scores.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
    assert len((tmp_path / "whole.jsonl").read_text().splitlines()) == 24
    refused = run_mtkit_in_process(*common, "--shard", "1/3")
    assert refused.returncode == 2 and "--shard 1/3: give --output" in refused.stderr


def test_filter_pairs_shards_select_from_every_score_once_merged(
    overfit_run: Path, de_en_run: Path, pairs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scores are sharded; --keep's fraction is of all pairs, so the shard that completes the set (or
    merge-shards) selects from the merged scores: the kept pairs of one process."""
    monkeypatch.setattr("mtkit.bulk.forced.CHUNK_PAIRS", 4)
    source, target = pairs
    common = ("filter-pairs", "--forward", overfit_run, "--backward", de_en_run, "--source", source)
    common += ("--target", target, "--keep", "0.5", "--engine", "torch", "--device", "cpu")
    mtkit_ok(*common, "--out", tmp_path / "whole")
    printed = run_three_shards(*common, "--out", tmp_path / "kept")
    assert f"scored {tmp_path / 'kept.scores.tsv.shard-00001-of-00003'}" in printed[0]
    assert "kept 12 of 24 pairs" in printed[2]
    for suffix in ("scores.tsv", "en", "de"):
        assert (tmp_path / f"kept.{suffix}").read_bytes() == (tmp_path / f"whole.{suffix}").read_bytes()
    mtkit_ok(*common, "--out", tmp_path / "byhand", "--shard", "1/2")
    with merge_lock(tmp_path / "byhand"):  # as when another shard is merging the set: this one leaves it
        mtkit_ok(*common, "--out", tmp_path / "byhand", "--shard", "2/2")
    assert not (tmp_path / "byhand.en").exists()
    assert "kept 12 of 24 pairs" in mtkit_ok("merge-shards", tmp_path / "byhand")
    for suffix in ("scores.tsv", "en", "de"):
        assert (tmp_path / f"byhand.{suffix}").read_bytes() == (tmp_path / f"whole.{suffix}").read_bytes()
    assert shards_left(tmp_path) == []
