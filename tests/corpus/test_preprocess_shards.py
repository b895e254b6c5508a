"""Preprocessing in shards (`--shard K/N`) and their join (`--join`) on real Multi30k: the joined directory is the one
preprocessing the whole corpus writes, byte for byte (manifest included), with duplicates across shards and pairs
dropped by length; an incomplete set, a set made with two sentencepiece models, and a shard without a model are
refused in one line."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from mtkit.corpus import preprocess as preprocess_module
from mtkit.corpus.binarized import read_manifest
from mtkit.corpus.config import CleaningConfig, PreprocessConfig
from mtkit.corpus.preprocess import preprocess
from mtkit.corpus.sharding import shard_path, shard_range
from mtkit.corpus.shards import join_shards
from mtkit.corpus.tokenizer_training import train_tokenizer
from mtkit.errors import UserError
from tests.conftest import read_gz_lines, run_mtkit_in_process, write_slice

CHUNK = 100  # pairs per chunk here: a corpus of a few hundred pairs spans several chunks, hence several shards


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preprocess_module, "CHUNK_PAIRS", CHUNK)


def write_pair(prefix: Path, src: list[str], tgt: list[str], gz: bool = False) -> str:
    for lang, lines in (("en", src), ("de", tgt)):
        text = "".join(line + "\n" for line in lines).encode()
        if gz:
            Path(f"{prefix}.{lang}.gz").write_bytes(gzip.compress(text, mtime=0))
        else:
            Path(f"{prefix}.{lang}").write_bytes(text)
    return str(prefix)


def noisy_corpus(multi30k: Path, n: int, offset: int = 0) -> tuple[list[str], list[str]]:
    """n Multi30k pairs with pairs too long or empty in each half, and pairs of the first half repeated in the second
    (and in the first): what the shards keep depends on what an earlier shard kept."""
    src = read_gz_lines(multi30k / "train.en.gz", offset + n)[offset:]
    tgt = read_gz_lines(multi30k / "train.de.gz", offset + n)[offset:]
    long_src = "A very long English sentence " + "with many more words in it " * 8
    half = n // 2
    src[10], tgt[10] = long_src, "Ein Satz."  # too long and a bad ratio
    src[half + 3], tgt[half + 3] = "", "leer"  # empty
    src[20], tgt[20] = src[5], tgt[5]  # a duplicate within the first shard
    for i in range(0, half - 10, 9):  # duplicates of first-half pairs in the second half
        src[half + 5 + i], tgt[half + 5 + i] = src[i], tgt[i]
    return src, tgt


def config(train: str, valid: str, test: str, spm: Path, **kwargs) -> PreprocessConfig:
    cleaning = CleaningConfig(max_len=30, max_ratio=2.5, dedup=True)
    return PreprocessConfig(
        "en", "de", train=train, valid=valid, test=[test], spm_model=str(spm), cleaning=cleaning, **kwargs
    )


def files_of(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def preprocess_in_shards(cfg: PreprocessConfig, out: Path, count: int, order: list[int] | None = None) -> None:
    for index in order or range(1, count + 1):
        preprocess(cfg, out, (index, count))


@pytest.fixture
def corpus(tmp_path: Path, multi30k: Path) -> tuple[str, str, str]:
    train = write_pair(tmp_path / "train", *noisy_corpus(multi30k, 650))
    valid = str(write_slice(multi30k, "val", tmp_path / "valid", 120))
    test = str(write_slice(multi30k, "test_2016_flickr", tmp_path / "test", 80))
    return train, valid, test


@pytest.mark.parametrize("count", [2, 3])
def test_shards_joined_are_the_whole_run_byte_for_byte(
    tmp_path: Path, multi30k_spm: Path, corpus: tuple[str, str, str], count: int
) -> None:
    cfg = config(*corpus, multi30k_spm)
    whole = preprocess(cfg, tmp_path / "whole")
    train = whole["splits"]["train"]["dropped"]
    assert train["duplicate"] >= 30 and train["too_long"] + train["ratio"] >= 1 and train["empty"] >= 1
    preprocess_in_shards(cfg, tmp_path / "data", count, order=list(range(count, 0, -1)))  # any order
    shards = [read_manifest(shard_path(tmp_path / "data", index, count)) for index in range(1, count + 1)]
    within = sum(shard["splits"]["train"]["dropped"]["duplicate"] for shard in shards)
    assert 0 < within < train["duplicate"]  # the join drops those an earlier shard kept
    joined = join_shards(tmp_path / "data")
    assert joined == whole
    # Every file, manifest.json included: training on the joined data is training on the whole run's, as the bytes
    # a run reads are the same (no second training run needed to show it).
    assert files_of(tmp_path / "data") == files_of(tmp_path / "whole")
    assert not [path for path in tmp_path.iterdir() if ".shard-" in path.name]  # the shards are removed


def test_several_corpora_shard_each_on_its_own(tmp_path: Path, multi30k: Path, multi30k_spm: Path) -> None:
    """One corpus deduplicated and over several chunks, one not and within one chunk (two of three shards get none
    of it), one gzipped; --keep-shards keeps the shards."""
    big = write_pair(tmp_path / "big", *noisy_corpus(multi30k, 450))
    small = write_pair(tmp_path / "small", *noisy_corpus(multi30k, 90, offset=1000), gz=True)
    valid = str(write_slice(multi30k, "val", tmp_path / "valid", 50))
    corpora = [{"name": "big", "train": big, "dedup": True}, {"name": "small", "train": small, "weight": 0.5}]
    cfg = PreprocessConfig("en", "de", corpora=corpora, valid=valid, spm_model=str(multi30k_spm))
    whole = preprocess(cfg, tmp_path / "whole")
    assert whole["splits"]["train.small"]["dropped"]["duplicate"] == 0 < whole["splits"]["train.big"]["pairs"]
    preprocess_in_shards(cfg, tmp_path / "data", 3)
    assert join_shards(tmp_path / "data", keep_shards=True) == whole
    assert files_of(tmp_path / "data") == files_of(tmp_path / "whole")
    assert all(shard_path(tmp_path / "data", index, 3).is_dir() for index in (1, 2, 3))


def test_the_command_with_a_slurm_array_and_gz_input(
    tmp_path: Path, multi30k: Path, multi30k_spm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    train = write_pair(tmp_path / "train", *noisy_corpus(multi30k, 400), gz=True)
    valid = str(write_slice(multi30k, "val", tmp_path / "valid", 60))
    common = ["preprocess", "-s", "en", "-t", "de", "--train", train, "--valid", valid, "--dedup", "--max-len", "30"]
    common += ["--spm-model", multi30k_spm]
    assert run_mtkit_in_process(*common, "--out", tmp_path / "whole").returncode == 0
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    monkeypatch.setenv("SLURM_ARRAY_TASK_MIN", "0")
    for task in ("1", "0"):
        monkeypatch.setenv("SLURM_ARRAY_TASK_ID", task)
        result = run_mtkit_in_process(*common, "--out", tmp_path / "data")
        assert result.returncode == 0, result.stderr
        assert f"shard {int(task) + 1}/2 done" in result.stdout
    assert sorted(path.name for path in tmp_path.glob("data.shard-*")) == [
        "data.shard-00001-of-00002",
        "data.shard-00002-of-00002",
    ]
    result = run_mtkit_in_process("preprocess", "--join", "--out", tmp_path / "data")
    assert result.returncode == 0, result.stderr
    assert files_of(tmp_path / "data") == files_of(tmp_path / "whole")


def test_an_incomplete_set_is_refused_naming_the_shard(
    tmp_path: Path, multi30k_spm: Path, corpus: tuple[str, str, str]
) -> None:
    cfg = config(*corpus, multi30k_spm)
    preprocess_in_shards(cfg, tmp_path / "data", 3, order=[1, 3])
    with pytest.raises(UserError, match=r"a set of 3 shards, data\.shard-00002-of-00003 missing; preprocess it"):
        join_shards(tmp_path / "data")
    result = run_mtkit_in_process("preprocess", "--join", "--out", tmp_path / "data")
    assert result.returncode == 2 and "data.shard-00002-of-00003 missing" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "data").exists()
    with pytest.raises(UserError, match="no shards to join"):
        join_shards(tmp_path / "other")


def test_a_shard_of_another_sentencepiece_model_is_refused(
    tmp_path: Path, multi30k: Path, multi30k_spm: Path, corpus: tuple[str, str, str]
) -> None:
    lines = read_gz_lines(multi30k / "train.en.gz", 800) + read_gz_lines(multi30k / "train.de.gz", 800)
    other = train_tokenizer(lines, tmp_path / "other.model", vocab_size=1000)
    preprocess(config(*corpus, multi30k_spm), tmp_path / "data", (1, 2))
    preprocess(config(*corpus, other), tmp_path / "data", (2, 2))
    with pytest.raises(UserError, match=r"data\.shard-00002-of-00002: made with another .*sentencepiece model"):
        join_shards(tmp_path / "data")
    # the same model, other cleaning: refused naming the option
    preprocess(config(*corpus, multi30k_spm, workers=2), tmp_path / "data", (2, 2))  # workers: no difference
    shutil.rmtree(shard_path(tmp_path / "data", 1, 2))
    cfg = config(*corpus, multi30k_spm)
    cfg.cleaning.max_len = 40
    preprocess(cfg, tmp_path / "data", (1, 2))
    with pytest.raises(UserError, match=r"made with another option max_len than shard 1"):
        join_shards(tmp_path / "data")


def test_a_shard_without_a_sentencepiece_model_is_refused(
    tmp_path: Path, corpus: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    train, valid, _ = corpus
    cfg = PreprocessConfig("en", "de", train=train, valid=valid)
    with pytest.raises(UserError, match="sharded preprocessing needs a sentencepiece model"):
        preprocess(cfg, tmp_path / "data", (1, 2))
    args = ["preprocess", "-s", "en", "-t", "de", "--train", train, "--out", tmp_path / "data"]
    result = run_mtkit_in_process(*args, "--shard", "1/2")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "--shard 1/2: sharded preprocessing needs --spm-model" in result.stderr
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    result = run_mtkit_in_process(*args)
    assert result.returncode == 2 and "RANK/WORLD_SIZE: sharded preprocessing needs --spm-model" in result.stderr
    assert not [path.name for path in tmp_path.iterdir() if path.name.startswith(("data", ".data"))]
    result = run_mtkit_in_process("preprocess", "--join", "--out", tmp_path / "data", "--train", train)
    assert result.returncode == 2 and "--join takes only --out" in result.stderr


def test_shard_ranges_cover_the_corpus_in_whole_chunks() -> None:
    """sharding.shard_range (which the bulk commands' line_range calls): the shards tile the corpus, in order, each
    starting on a chunk boundary."""
    for total in (0, 1, 5, 99, 100, 101, 650, 1000):
        for count in (1, 2, 3, 7, 12):
            for align in (1, 3, 100):
                ranges = [shard_range(total, index, count, align) for index in range(1, count + 1)]
                assert all(start % align == 0 or start == total for start, _ in ranges)
                assert ranges[0][0] == 0 and ranges[-1][1] == total
                assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))


def without(value: object, text: str) -> object:
    """`value` (a manifest) with every string equal to `text` replaced by "": the corpus as given differs."""
    if isinstance(value, dict):
        return {key: without(item, text) for key, item in value.items()}
    if isinstance(value, list):
        return [without(item, text) for item in value]
    return "" if value == text else value


def test_a_corpus_in_many_files_is_their_lines_in_order(
    tmp_path: Path, multi30k_spm: Path, corpus: tuple[str, str, str]
) -> None:
    """A training corpus given as a glob or a directory of file pairs (plain or .gz, boundaries inside chunks)
    preprocesses as the one file of their lines in sorted order, whole and in shards joined."""
    train, valid, test = corpus
    src, tgt = (Path(f"{train}.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("en", "de"))
    parts = tmp_path / "parts"
    parts.mkdir()
    bounds = [0, 170, 400, len(src)]
    for k, (first, last) in enumerate(zip(bounds, bounds[1:]), 1):
        write_pair(parts / f"part-{k}", src[first:last], tgt[first:last], gz=k == 2)
    whole = preprocess(config(train, valid, test, multi30k_spm), tmp_path / "whole")
    expected = {name: data for name, data in files_of(tmp_path / "whole").items() if name != "manifest.json"}
    for given in (str(parts / "part-*"), str(parts)):
        out = tmp_path / f"data-{len(given)}"
        manifest = preprocess(config(given, valid, test, multi30k_spm), out)
        assert {name: data for name, data in files_of(out).items() if name != "manifest.json"} == expected
        assert without(manifest, given) == without(whole, train)
    preprocess_in_shards(config(str(parts / "part-*"), valid, test, multi30k_spm), tmp_path / "sharded", 2)
    join_shards(tmp_path / "sharded")
    assert {name: data for name, data in files_of(tmp_path / "sharded").items() if name != "manifest.json"} == expected
    (parts / "part-9.en").write_text("A lone line.\n", encoding="utf-8")  # no German partner
    with pytest.raises(UserError, match=r"part-9\.de: no such file"):
        preprocess(config(str(parts / "part-*"), valid, test, multi30k_spm), tmp_path / "bad")
    with pytest.raises(UserError, match=r"none-\*: no file matches"):
        preprocess(config(str(tmp_path / "none-*"), valid, test, multi30k_spm), tmp_path / "bad")
