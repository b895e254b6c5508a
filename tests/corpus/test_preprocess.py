"""Preprocess on real Multi30k: manifest, exact valid/test round trips, drop accounting, errors, HF input."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from mtkit.corpus import preprocess as preprocess_module
from mtkit.corpus.binarized import ParallelData, data_paths, read_manifest
from mtkit.corpus.config import CleaningConfig, PreprocessConfig
from mtkit.corpus.filters import FILTER_REASONS
from mtkit.corpus.preprocess import CHUNK_PAIRS, preprocess
from mtkit.corpus.sources import hf_chunks, load_hf_split
from mtkit.errors import UserError
from mtkit.files import file_sha256
from mtkit.tokenizer import Tokenizer
from tests.conftest import read_gz_lines, write_slice


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


def write_pair(prefix: Path, src: list[str], tgt: list[str], newline: str = "\n") -> str:
    Path(f"{prefix}.en").write_text("".join(line + newline for line in src), encoding="utf-8")
    Path(f"{prefix}.de").write_text("".join(line + newline for line in tgt), encoding="utf-8")
    return str(prefix)


def decoded_split(data_dir: Path, split: str) -> tuple[list[str], list[str]]:
    data = ParallelData.open(data_dir, split, "en", "de")
    tokenizer = Tokenizer.load(data_dir / "spm.model")
    src = tokenizer.decode([data.src(i) for i in range(len(data))])
    tgt = tokenizer.decode([data.tgt(i) for i in range(len(data))])
    return src, tgt


def assert_nothing_written(parent: Path) -> None:
    assert not (parent / "out").exists()
    assert not [p.name for p in parent.iterdir() if p.name.startswith(".out")]


def test_manifest(multi30k_data: Path, multi30k_spm: Path) -> None:
    manifest = read_manifest(multi30k_data)
    assert (manifest["format"], manifest["version"]) == ("mtkit-data", 1)
    assert (manifest["source_lang"], manifest["target_lang"], manifest["vocab_size"]) == ("en", "de", 1000)
    assert (multi30k_data / "spm.model").read_bytes() == multi30k_spm.read_bytes()
    assert manifest["spm_sha256"] == file_sha256(multi30k_data / "spm.model")
    assert set(manifest["splits"]) == {"train", "valid", "test_2016_flickr"}
    train = manifest["splits"]["train"]
    assert train["input_pairs"] == 29000
    assert train["pairs"] == train["input_pairs"] - sum(train["dropped"].values())
    data = ParallelData.open(multi30k_data, "train", "en", "de")
    assert train["src_tokens"] == data.src_lens.sum() and train["tgt_tokens"] == data.tgt_lens.sum()
    assert manifest["options"]["max_len"] == 256 and manifest["options"]["spm_model"] == str(multi30k_spm)
    assert json.loads((multi30k_data / "manifest.json").read_text()) == manifest


@pytest.mark.parametrize(("split", "stem"), [("valid", "val"), ("test_2016_flickr", "test_2016_flickr")])
def test_valid_and_test_round_trip_line_for_line(multi30k_data: Path, multi30k: Path, split: str, stem: str) -> None:
    src, tgt = decoded_split(multi30k_data, split)
    expected_src = [line.strip() for line in read_gz_lines(multi30k / f"{stem}.en.gz")]
    expected_tgt = [line.strip() for line in read_gz_lines(multi30k / f"{stem}.de.gz")]
    manifest = read_manifest(multi30k_data)["splits"][split]
    assert manifest["pairs"] == manifest["input_pairs"] == len(expected_src)
    assert src == expected_src and tgt == expected_tgt


def test_valid_is_never_filtered(tmp_path: Path, multi30k_spm: Path) -> None:
    src = ["", "   ", "a b", "a b", "x " * 400, "only source", "  padded  "]
    tgt = ["", "y", "c d", "c d", "short", "", "kept"]
    valid = write_pair(tmp_path / "valid", src, tgt, newline="\r\n")
    cfg = PreprocessConfig(
        "en", "de", valid=valid, spm_model=str(multi30k_spm), cleaning=CleaningConfig(max_len=10, dedup=True)
    )
    manifest = preprocess(cfg, tmp_path / "out")
    assert manifest["splits"]["valid"]["pairs"] == len(src)
    assert decoded_split(tmp_path / "out", "valid") == ([s.strip() for s in src], [t.strip() for t in tgt])


def reference_drops(src: list[str], tgt: list[str], tokenizer: Tokenizer, cfg: CleaningConfig) -> dict[str, int]:
    """The cleaning rules, one pair at a time."""
    drops = dict.fromkeys(preprocess_module.DROP_REASONS, 0)
    seen = set()
    for s, t in zip(src, tgt):
        s, t = s.strip(), t.strip()
        a, b = (len(ids) for ids in tokenizer.encode([s, t]))
        if min(a, b) == 0:
            drops["empty"] += 1
        elif min(a, b) < cfg.min_len:
            drops["too_short"] += 1
        elif max(a, b) > cfg.max_len:
            drops["too_long"] += 1
        elif max(a, b) > cfg.max_ratio * min(a, b):
            drops["ratio"] += 1
        elif (s, t) in seen:
            drops["duplicate"] += 1
        else:
            seen.add((s, t))
    return drops


def test_drop_counts_add_up(tmp_path: Path, multi30k: Path, multi30k_spm: Path, monkeypatch) -> None:
    monkeypatch.setattr(preprocess_module, "CHUNK_PAIRS", 300)  # duplicates across chunk boundaries
    src = read_gz_lines(multi30k / "train.en.gz", 1500)
    tgt = read_gz_lines(multi30k / "train.de.gz", 1500)
    src += ["", "  ", "source only", "Hi", "a", src[0], src[1] + "  ", src[1000]] + src[:700:7]
    tgt += ["", "target", "", "Ein sehr langer deutscher Satz mit vielen Wörtern darin", "b", tgt[0], tgt[1], "x"]
    tgt += tgt[:700:7]
    train = write_pair(tmp_path / "train", src, tgt)
    cleaning = CleaningConfig(max_len=30, max_ratio=2.5, min_len=2, dedup=True)
    cfg = PreprocessConfig("en", "de", train=train, spm_model=str(multi30k_spm), cleaning=cleaning)
    split = preprocess(cfg, tmp_path / "out")["splits"]["train"]
    expected = reference_drops(src, tgt, Tokenizer.load(multi30k_spm), cleaning)
    assert split["dropped"] == expected
    # every length rule and dedup was exercised (the corpus filters' drops: tests/corpus/test_filters.py)
    assert all(count for reason, count in expected.items() if reason not in FILTER_REASONS)
    assert split["input_pairs"] == len(src)
    assert split["pairs"] == len(src) - sum(expected.values())
    kept = list(zip(*decoded_split(tmp_path / "out", "train")))
    assert len(kept) == split["pairs"] == len(set(kept))
    data = ParallelData.open(tmp_path / "out", "train", "en", "de")
    shorter, longer = np.minimum(data.src_lens, data.tgt_lens), np.maximum(data.src_lens, data.tgt_lens)
    assert shorter.min() >= 2 and longer.max() <= 30 and (longer <= 2.5 * shorter).all()


def test_two_workers_write_the_same_files(tmp_path: Path, multi30k: Path, multi30k_spm: Path, monkeypatch) -> None:
    monkeypatch.setattr(preprocess_module, "CHUNK_PAIRS", 400)
    train = write_slice(multi30k, "train", tmp_path / "train", 3000)
    valid = write_slice(multi30k, "val", tmp_path / "valid", 500)
    outputs = []
    for workers in (1, 2):
        cfg = PreprocessConfig(
            "en",
            "de",
            train=str(train),
            valid=str(valid),
            spm_model=str(multi30k_spm),
            cleaning=CleaningConfig(max_len=20, dedup=True),
            workers=workers,
        )
        outputs.append((preprocess(cfg, tmp_path / f"out{workers}"), tmp_path / f"out{workers}"))
    (first, first_dir), (second, second_dir) = outputs
    assert first["splits"] == second["splits"]
    for split in ("train", "valid"):
        for lang in ("en", "de"):
            for a, b in zip(data_paths(first_dir, split, lang), data_paths(second_dir, split, lang)):
                assert a.read_bytes() == b.read_bytes()


def test_trains_a_deterministic_tokenizer(tmp_path: Path, multi30k: Path) -> None:
    train = write_slice(multi30k, "train", tmp_path / "train", 1000)
    cfg = PreprocessConfig("en", "de", train=str(train), vocab_size=600, input_sentence_size=1500)
    first, second = preprocess(cfg, tmp_path / "a"), preprocess(cfg, tmp_path / "b")
    assert first["vocab_size"] == 600 and Tokenizer.load(tmp_path / "a" / "spm.model").vocab_size == 600
    assert first["spm_sha256"] == second["spm_sha256"] == file_sha256(tmp_path / "a" / "spm.model")
    assert first["splits"] == second["splits"]


def test_line_count_mismatch(tmp_path: Path, multi30k_spm: Path) -> None:
    train = write_pair(tmp_path / "train", ["a", "b", "c"], ["x", "y", "z"])
    test = write_pair(tmp_path / "test", ["a", "b", "c"], ["x", "y"])
    cfg = PreprocessConfig("en", "de", train=train, test=[test], spm_model=str(multi30k_spm))
    with pytest.raises(UserError, match=r"test\.en has 3 lines but .*test\.de has 2 lines"):
        preprocess(cfg, tmp_path / "out")
    assert_nothing_written(tmp_path)


def test_missing_file(tmp_path: Path) -> None:
    Path(tmp_path / "train.en").write_text("a\n")
    cfg = PreprocessConfig("en", "de", train=str(tmp_path / "train"))
    with pytest.raises(UserError, match=r"train\.de: no such file"):
        preprocess(cfg, tmp_path / "out")
    valid = write_pair(tmp_path / "valid", ["a"], ["b"])
    cfg = PreprocessConfig("en", "de", valid=valid, spm_model=str(tmp_path / "nope.model"))
    with pytest.raises(UserError, match="nope.model"):
        preprocess(cfg, tmp_path / "out")
    assert_nothing_written(tmp_path)


@pytest.mark.parametrize("split", ["train", "valid"])
def test_bad_utf8_names_file_and_line(tmp_path: Path, multi30k: Path, monkeypatch, split: str) -> None:
    monkeypatch.setattr(preprocess_module, "CHUNK_PAIRS", 2)  # line numbers must survive chunking
    train = write_slice(multi30k, "train", tmp_path / "train", 300)
    valid = write_slice(multi30k, "val", tmp_path / "valid", 10)
    bad = Path(f"{tmp_path / split}.de")
    lines = bad.read_bytes().split(b"\n")
    lines[4] = b"caf\xe9 " + lines[4]
    bad.write_bytes(b"\n".join(lines))
    cfg = PreprocessConfig("en", "de", train=str(train), valid=str(valid), vocab_size=400)
    with pytest.raises(UserError, match=rf"{split}\.de:5: invalid UTF-8"):
        preprocess(cfg, tmp_path / "out")
    assert_nothing_written(tmp_path)
    cfg.on_bad_utf8 = "replace"
    preprocess(cfg, tmp_path / "out")
    split_name = "train" if split == "train" else "valid"
    assert "caf\ufffd" in decoded_split(tmp_path / "out", split_name)[1][4]


def test_output_directory_safety(tmp_path: Path, multi30k_spm: Path) -> None:
    valid = write_pair(tmp_path / "valid", ["a"], ["b"])
    cfg = PreprocessConfig("en", "de", valid=valid, spm_model=str(multi30k_spm))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("precious")
    with pytest.raises(UserError, match="not a preprocessed data directory"):
        preprocess(cfg, tmp_path / "home")
    assert (tmp_path / "home" / "notes.txt").read_text() == "precious"
    preprocess(cfg, tmp_path / "out")
    preprocess(cfg, tmp_path / "out")  # a previous result is replaced
    assert read_manifest(tmp_path / "out")["splits"]["valid"]["pairs"] == 1


def test_config_and_split_errors(tmp_path: Path, multi30k_spm: Path) -> None:
    for bad in ({"target_lang": "en"}, {"workers": 0}, {"on_bad_utf8": "ignore"}, {"vocab_size": 0}):
        with pytest.raises(UserError, match=rf"preprocess\.{next(iter(bad))} "):
            PreprocessConfig(**{"source_lang": "en", "target_lang": "de", **bad})
    valid = write_pair(tmp_path / "valid", ["a"], ["b"])
    with pytest.raises(UserError, match="no train split"):
        preprocess(PreprocessConfig("en", "de", valid=valid), tmp_path / "out")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    tests = [write_pair(tmp_path / d / "test", ["a"], ["b"]) for d in ("a", "b")]
    with pytest.raises(UserError, match="both be named test"):
        preprocess(PreprocessConfig("en", "de", test=tests, spm_model=str(multi30k_spm)), tmp_path / "out")
    assert_nothing_written(tmp_path)


def translation_rows(multi30k: Path, stem: str, n: int) -> dict[str, list]:
    en, de = read_gz_lines(multi30k / f"{stem}.en.gz", n), read_gz_lines(multi30k / f"{stem}.de.gz", n)
    return {"translation": [{"de": d, "en": e} for e, d in zip(en, de)]}


def test_hf_dataset_matches_the_same_files(tmp_path: Path, multi30k: Path, multi30k_spm: Path) -> None:
    datasets = pytest.importorskip("datasets")
    splits = {"train": ("train", 500), "validation": ("val", 200), "test": ("test_2016_flickr", 100)}
    saved = datasets.DatasetDict(
        {name: datasets.Dataset.from_dict(translation_rows(multi30k, stem, n)) for name, (stem, n) in splits.items()}
    )
    saved.save_to_disk(str(tmp_path / "wmt-like"))
    dedup = CleaningConfig(dedup=True)
    cfg = PreprocessConfig(
        "en", "de", hf_dataset=str(tmp_path / "wmt-like"), spm_model=str(multi30k_spm), cleaning=dedup
    )
    from_hf = preprocess(cfg, tmp_path / "hf")
    prefixes = {
        ours: str(write_slice(multi30k, stem, tmp_path / ours, n))
        for ours, (stem, n) in zip(("train", "valid", "test"), splits.values())
    }
    cfg = PreprocessConfig(
        "en",
        "de",
        train=prefixes["train"],
        valid=prefixes["valid"],
        test=[prefixes["test"]],
        spm_model=str(multi30k_spm),
        cleaning=dedup,
    )
    from_files = preprocess(cfg, tmp_path / "files")
    assert from_hf["splits"] == from_files["splits"]
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            for a, b in zip(data_paths(tmp_path / "hf", split, lang), data_paths(tmp_path / "files", split, lang)):
                assert a.read_bytes() == b.read_bytes()
    cfg = PreprocessConfig(
        "en",
        "de",
        hf_dataset=str(tmp_path / "wmt-like"),
        spm_model=str(multi30k_spm),
        hf_splits={"train": "train", "valid": "dev"},
    )
    with pytest.raises(UserError, match="no split 'dev'"):
        preprocess(cfg, tmp_path / "out")


HUB_LAYOUT_README = """---
configs:
- config_name: de-en
  data_files:
  - split: train
    path: de-en/train-*
  - split: validation
    path: de-en/validation-*
  - split: test
    path: de-en/test-*
---
"""


def test_hub_parquet_layout_with_a_cache_dir(tmp_path: Path, multi30k: Path, multi30k_spm: Path) -> None:
    """A local copy of wmt/wmt14's Hub layout (Parquet shards per config, configs in README.md) loads through
    datasets.load_dataset as the Hub name does, and --hf-cache-dir (or the recipe's hf_cache_dir) is where
    datasets writes its cache."""
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa
    from typer.testing import CliRunner

    from mtkit.cli.main import app

    hub = tmp_path / "wmt14"
    (hub / "de-en").mkdir(parents=True)
    (hub / "README.md").write_text(HUB_LAYOUT_README)
    sizes = {"train": ("train", 300), "validation": ("val", 40), "test": ("test_2016_flickr", 30)}
    for split, (stem, n) in sizes.items():
        pq.write_table(pa.table(translation_rows(multi30k, stem, n)), hub / "de-en" / f"{split}-00000-of-00001.parquet")
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        f'[preprocess]\nhf_dataset = "{hub}"\nhf_config = "de-en"\nsource_lang = "en"\ntarget_lang = "de"\n'
        f'hf_cache_dir = "{tmp_path / "recipe-cache"}"\n'
    )
    for name, flags in (("recipe-cache", []), ("flag-cache", ["--hf-cache-dir", str(tmp_path / "flag-cache")])):
        result = CliRunner().invoke(
            app,
            [
                "preprocess",
                "--config",
                str(recipe),
                "--spm-model",
                str(multi30k_spm),
                "--out",
                str(tmp_path / f"data-{name}"),
                "--json",
                *flags,
            ],
        )
        assert result.exit_code == 0, result.stderr
        manifest = json.loads(result.stdout)
        assert {split: s["pairs"] for split, s in manifest["splits"].items()} == {"train": 300, "valid": 40, "test": 30}
        assert manifest["options"]["hf_cache_dir"] == str(tmp_path / name)
        assert list((tmp_path / name).rglob("*.arrow")), f"datasets wrote no cache under {name}"
    assert decoded_split(tmp_path / "data-flag-cache", "test")[1] == read_gz_lines(
        multi30k / "test_2016_flickr.de.gz", 30
    )


def test_a_foreign_sentencepiece_model_preprocesses_trains_and_translates(
    foreign_data: Path, foreign_run: Path, foreign_spm: Path, multi30k: Path
) -> None:
    """--spm-model made with sentencepiece's defaults (unk 0, bos 1, eos 2, no pad): data in mtkit's ids, a run."""
    import sentencepiece as spm

    from mtkit.engines.torch_engine import TorchTranslator

    data = foreign_data
    theirs = spm.SentencePieceProcessor(model_file=str(foreign_spm))
    manifest = read_manifest(data)
    assert manifest["vocab_size"] == theirs.get_piece_size() + 1  # + mtkit's pad
    assert (data / "spm.model").read_bytes() == foreign_spm.read_bytes()
    lines = [line.strip() for line in read_gz_lines(multi30k / "val.en.gz", 200)]
    valid = ParallelData.open(data, "valid", "en", "de")
    stored = [valid.src(i).tolist() for i in range(len(valid))]
    assert stored == [[i + 1 for i in ids] for ids in theirs.encode(lines)]
    assert decoded_split(data, "valid")[0] == theirs.decode(theirs.encode(lines))
    train = ParallelData.open(data, "train", "en", "de")
    train_ids = np.concatenate([train.tgt(i) for i in range(len(train))])
    assert not np.isin(train_ids, [0, 2, 3]).any() and train_ids.max() < manifest["vocab_size"]  # no pad/bos/eos inside
    assert (train_ids == 1).any()  # <unk> (digits: no byte fallback) is the model's unk, mtkit's 1
    translator = TorchTranslator.load(foreign_run)
    assert translator.model_cfg.vocab_size == manifest["vocab_size"]
    out = translator.translate(lines[:5])
    assert len(out) == 5 and all(isinstance(text, str) and "<s>" not in text for text in out)


def test_load_hf_pairs_from_json_files(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    rows = [{"translation": {"de": f"Satz {i}", "en": f"sentence {i}"}} for i in range(5)]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    files = {"train": str(path)}
    pairs = list(load_hf_pairs("json", None, "train", "en", "de", data_files=files, cache_dir=str(tmp_path / "c")))
    assert pairs == [(f"sentence {i}", f"Satz {i}") for i in range(5)]
    with pytest.raises(UserError, match="no 'fr' translations"):
        load_hf_pairs("json", None, "train", "en", "fr", data_files=files, cache_dir=str(tmp_path / "c"))


def test_last_line_without_newline_and_gzip(tmp_path: Path, multi30k_spm: Path) -> None:
    import gzip

    Path(tmp_path / "valid.en").write_bytes(b"one\n\ntwo")
    with gzip.open(tmp_path / "valid.de.gz", "wb") as handle:
        handle.write(b"eins\r\n\r\nzwei\r\n")
    cfg = PreprocessConfig("en", "de", valid=str(tmp_path / "valid"), spm_model=str(multi30k_spm))
    preprocess(cfg, tmp_path / "out")
    assert decoded_split(tmp_path / "out", "valid") == (["one", "", "two"], ["eins", "", "zwei"])


def test_digest_set_matches_a_python_set() -> None:
    rng = np.random.default_rng(0)
    seen_set: set[int] = set()
    digests = preprocess_module.DigestSet()
    for _ in range(200):
        batch = rng.integers(0, 3000, rng.integers(0, 40)).astype(np.uint64)
        expected = []
        for value in batch.tolist():
            expected.append(value not in seen_set)
            seen_set.add(value)
        assert digests.add_new(batch).tolist() == expected
    assert len(digests._levels) <= 12


# ---- several corpora, several language pairs ----------------------------------------------------------------


def test_corpora_are_binarized_with_language_tokens_and_tags(multilingual_data: Path, multi30k: Path) -> None:
    """Each corpus is its own split; every source starts with its target-language token, a tagged corpus's then with
    its tag (each one piece of the vocabulary); valid sets per pair; targets as they are."""
    manifest = read_manifest(multilingual_data)
    tokenizer = Tokenizer.load(multilingual_data / "spm.model")
    assert tokenizer.pieces()[4:7] == [">>de<<", ">>fr<<", "<bt>"]  # sentencepiece's user-defined symbols
    assert (manifest["pairs"], manifest["language_tokens"]) == (["en-de", "en-fr"], True)
    assert (manifest["source_lang"], manifest["target_lang"]) == ("en", "de")  # the first corpus's
    assert manifest["valid_splits"] == {"en-de": "valid.en-de", "en-fr": "valid.en-fr"}
    assert set(manifest["splits"]) == {"train.de", "train.fr", "valid.en-de", "valid.en-fr"}
    fr = manifest["corpora"]["fr"]
    assert {k: fr[k] for k in ("split", "source_lang", "target_lang", "weight", "tag", "pairs")} == {
        "split": "train.fr",
        "source_lang": "en",
        "target_lang": "fr",
        "weight": 2.0,
        "tag": "<bt>",
        "pairs": 120,
    }
    assert manifest["corpora"]["de"]["tag"] is None and manifest["corpora"]["de"]["pairs"] == 240
    english = [line.strip() for line in read_gz_lines(multi30k / "train.en.gz", 360)]
    for split, prefix, lines in (
        ("train.de", [4], english[:240]),
        ("train.fr", [5, 6], english[240:]),
        ("valid.en-fr", [5], [line.strip() for line in read_gz_lines(multi30k / "val.en.gz", 40)]),
    ):
        data = ParallelData.open(multilingual_data, split, "en", split[-2:])
        assert [data.src(i).tolist() for i in range(len(data))] == [prefix + ids for ids in tokenizer.encode(lines)]
    french = [line.strip() for line in read_gz_lines(multi30k / "train.fr.gz", 360)[240:]]
    data = ParallelData.open(multilingual_data, "train.fr", "en", "fr")
    assert tokenizer.decode([data.tgt(i) for i in range(len(data))]) == french
    with pytest.raises(UserError, match="holds en-fr, not en-de"):
        ParallelData.open(multilingual_data, "train.fr", "en", "de")


def test_each_corpus_cleans_by_its_own_settings(tmp_path: Path, multi30k: Path, multi30k_spm: Path) -> None:
    """Two corpora of one pair: no language tokens (one target language), today's valid and test names, and a
    corpus's own max_len over the section's."""
    short = write_slice(multi30k, "train", tmp_path / "short", 200)
    long = write_slice(multi30k, "val", tmp_path / "long", 200)
    valid = write_slice(multi30k, "val", tmp_path / "valid", 30)
    cfg = PreprocessConfig(
        "en",
        "de",
        valid=str(valid),
        test=[str(short)],
        spm_model=str(multi30k_spm),
        cleaning=CleaningConfig(max_len=30),
        corpora=[{"name": "a", "train": str(short), "max_len": 12}, {"name": "b", "train": str(long)}],
    )
    manifest = preprocess(cfg, tmp_path / "out")
    assert set(manifest["splits"]) == {"train.a", "train.b", "valid", "short"} and manifest["language_tokens"] is False
    a, b = manifest["corpora"]["a"], manifest["corpora"]["b"]
    reference = Tokenizer.load(multi30k_spm)
    for entry, prefix, max_len in ((a, short, 12), (b, long, 30)):
        lens = [
            max(map(len, reference.encode([s.strip(), t.strip()])))
            for s, t in zip(
                Path(f"{prefix}.en").read_text().splitlines(), Path(f"{prefix}.de").read_text().splitlines()
            )
        ]
        assert entry["dropped"]["too_long"] == sum(n > max_len for n in lens) > 0
        assert entry["pairs"] == entry["input_pairs"] - sum(entry["dropped"].values())
    data = ParallelData.open(tmp_path / "out", "train.a", "en", "de")
    assert max(data.src_lens.max(), data.tgt_lens.max()) <= 12


def test_several_pairs_name_valid_and_test_by_pair(tmp_path: Path, multi30k: Path, multi30k_spm: Path) -> None:
    for lang in ("en", "de", "fr"):
        Path(f"{tmp_path / 'val'}.{lang}").write_text("\n".join(read_gz_lines(multi30k / f"val.{lang}.gz", 20)) + "\n")
        Path(f"{tmp_path / 'other'}.{lang}").write_text(
            "\n".join(read_gz_lines(multi30k / f"val.{lang}.gz", 30)) + "\n"
        )
    corpora = [
        {"name": "de", "train": str(tmp_path / "val"), "target_lang": "de"},
        {"name": "fr", "train": str(tmp_path / "val"), "target_lang": "fr"},
    ]
    cfg = PreprocessConfig(
        source_lang="en",
        valid={"en-de": str(tmp_path / "val"), "en-fr": str(tmp_path / "other")},
        test=[str(tmp_path / "val")],
        spm_model=str(multi30k_spm),
        language_tokens="never",
        corpora=corpora,
    )
    manifest = preprocess(cfg, tmp_path / "out")
    assert {name: split["pairs"] for name, split in manifest["splits"].items() if "train" not in name} == {
        "valid.en-de": 20,
        "valid.en-fr": 30,
        "val.en-de": 20,
        "val.en-fr": 20,
    }
    assert manifest["language_tokens"] is False
    data = ParallelData.open(tmp_path / "out", "val.en-fr", "en", "fr")
    assert data.src(0).tolist() == Tokenizer.load(multi30k_spm).encode([read_gz_lines(multi30k / "val.en.gz", 1)[0]])[0]


RECIPE_ERRORS = {
    "missing file": ('train = "{raw}/nope"', "corpus fr: {raw}/nope.en: no such file (nor {raw}/nope.en.gz)"),
    "pair without valid": (
        'valid = {{"en-de" = "{raw}/val"}}',
        "valid: no valid set for the language pair en-fr; give one prefix for every pair or a table that names each",
    ),
    "weight": ("weight = 0", "corpus fr: weight must be positive, got 0.0"),
    "negative weight": ("weight = -2", "corpus fr: weight must be positive, got -2.0"),
    "tag with a space": ('tag = "back translated"', "corpus fr: tag 'back translated' must be one word without spaces"),
    "tag": ('tag = "<bt>"', "corpus fr: tag '<bt>' is not a single piece of {spm}"),
    "duplicate": ('name = "de"', "corpus de: two corpora have this name; names must be unique"),
}


@pytest.mark.parametrize("case", sorted(RECIPE_ERRORS))
def test_corpora_mistakes_are_one_line_and_write_nothing(
    tmp_path: Path, multi30k: Path, multi30k_spm: Path, case: str
) -> None:
    from typer.testing import CliRunner

    from mtkit.cli.main import app

    raw = tmp_path / "raw"
    raw.mkdir()
    for lang in ("en", "de", "fr"):
        Path(f"{raw / 'val'}.{lang}").write_text("\n".join(read_gz_lines(multi30k / f"val.{lang}.gz", 20)) + "\n")
    change, expected = (text.format(raw=raw, spm=multi30k_spm) for text in RECIPE_ERRORS[case])
    # The spm model has no >>de<< and >>fr<<: language tokens are off, except where the case is about a piece.
    fr = {"name": '"fr"', "train": f'"{raw}/val"', "target_lang": '"fr"'}
    key = change.split(" = ")[0]
    section = change if key == "valid" else f'valid = "{raw}/val"'
    if key != "valid":
        fr[key] = change.split(" = ", 1)[1]
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        f'[preprocess]\nsource_lang = "en"\n{section}\nspm_model = "{multi30k_spm}"\nlanguage_tokens = "never"\n'
        f'[[preprocess.corpora]]\nname = "de"\ntrain = "{raw}/val"\ntarget_lang = "de"\n'
        "[[preprocess.corpora]]\n" + "".join(f"{k} = {v}\n" for k, v in fr.items())
    )
    result = CliRunner().invoke(app, ["preprocess", "--config", str(recipe), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [f"error: {expected}"], result.stderr
    assert_nothing_written(tmp_path)


def test_a_language_token_a_reused_model_lacks_is_refused(tmp_path: Path, multi30k: Path, multi30k_spm: Path) -> None:
    valid = write_slice(multi30k, "val", tmp_path / "valid", 10)
    cfg = PreprocessConfig("en", "de", train=str(valid), spm_model=str(multi30k_spm), language_tokens="always")
    with pytest.raises(
        UserError,
        match=rf"^corpus train: language token '>>de<<' \(target_lang de\) is not a single "
        rf"piece of {multi30k_spm}$",
    ):
        preprocess(cfg, tmp_path / "out")
    assert_nothing_written(tmp_path)


def test_without_corpora_the_manifest_describes_the_one_corpus(multi30k_data: Path) -> None:
    manifest = read_manifest(multi30k_data)
    assert (manifest["pairs"], manifest["language_tokens"], manifest["valid_splits"]) == (
        ["en-de"],
        False,
        {"en-de": "valid"},
    )
    assert list(manifest["corpora"]) == ["train"] and manifest["corpora"]["train"]["split"] == "train"
    assert manifest["corpora"]["train"]["weight"] == 1.0 and manifest["corpora"]["train"]["tag"] is None


def test_the_multilingual_recipe_describes_its_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """recipes/multi30k-multilingual/en-xx.toml: three corpora of the shipped files, en -> de, fr, cs, each with its
    valid and test set and language tokens (planned and counted: nothing is encoded)."""
    from mtkit.corpus.plan import plan_splits
    from mtkit.recipe import resolve_preprocess
    from tests.conftest import ROOT

    monkeypatch.chdir(ROOT)  # recipe paths are relative to where mtkit runs: the repository root
    plan = plan_splits(resolve_preprocess(ROOT / "recipes/multi30k-multilingual/en-xx.toml", {}), 10_000)
    assert (plan.pairs, plan.language_tokens) == (["en-de", "en-fr", "en-cs"], True)
    assert {split.name: split.source.count for split in plan.splits} == {
        **{f"train.multi30k-{lang}": 29000 for lang in ("de", "fr", "cs")},
        **{f"valid.en-{lang}": 1014 for lang in ("de", "fr", "cs")},
        **{f"test_2016_flickr.en-{lang}": 1000 for lang in ("de", "fr", "cs")},
    }
    assert plan.symbols() == [">>de<<", ">>fr<<", ">>cs<<"]


def test_a_hugging_face_corpus_beside_a_file_corpus(tmp_path: Path, multi30k: Path, multi30k_spm: Path) -> None:
    """hf_dataset/hf_config/hf_split in a corpus table: the same pairs as files give the same split bytes."""
    datasets = pytest.importorskip("datasets")
    datasets.DatasetDict({"dev": datasets.Dataset.from_dict(translation_rows(multi30k, "val", 60))}).save_to_disk(
        str(tmp_path / "hub")
    )
    files = write_slice(multi30k, "val", tmp_path / "files", 60)
    cfg = PreprocessConfig(
        "en",
        "de",
        spm_model=str(multi30k_spm),
        corpora=[
            {"name": "hub", "hf_dataset": str(tmp_path / "hub"), "hf_split": "dev"},
            {"name": "files", "train": str(files)},
        ],
    )
    manifest = preprocess(cfg, tmp_path / "out")
    assert manifest["corpora"]["hub"]["pairs"] == manifest["corpora"]["files"]["pairs"] == 60
    for lang in ("en", "de"):
        for a, b in zip(
            data_paths(tmp_path / "out", "train.hub", lang), data_paths(tmp_path / "out", "train.files", lang)
        ):
            assert a.read_bytes() == b.read_bytes()
    cfg.corpora[0]["hf_split"] = "train"
    with pytest.raises(UserError, match=r"^corpus hub: .*hub: no split 'train' \(has dev\)"):
        preprocess(PreprocessConfig("en", "de", spm_model=str(multi30k_spm), corpora=cfg.corpora), tmp_path / "out2")
