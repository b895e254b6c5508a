"""A corpus with `fuzzy_matches` (neural fuzzy repair's training data, mtkit.corpus.fuzzy_matches with the memory's
matcher, mtkit.memory.fuzzy_repair): each kept pair's source carries its best other match's target after the reserved
piece, the piece is one piece of the vocabulary, and a model's engines know it by that piece."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtkit.corpus.binarized import ParallelData
from mtkit.corpus.config import PreprocessConfig
from mtkit.corpus.fuzzy_matches import FUZZY_PIECE, fuzzy_piece, fuzzy_source
from mtkit.corpus.plan import plan_splits
from mtkit.corpus.sources import file_source
from mtkit.errors import UserError
from mtkit.memory.fuzzy_repair import matched_pairs
from mtkit.memory.matching import MemoryIndex
from mtkit.tokenizer import load_tokenizer
from tests.conftest import run_mtkit_in_process, write_slice

PAIRS = 400


@pytest.fixture(scope="module")
def train(multi30k: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_slice(multi30k, "train", tmp_path_factory.mktemp("fuzzy") / "train", PAIRS)


def test_each_source_gets_its_best_other_match_never_itself(train: Path) -> None:
    source = file_source("train.fuzzy", str(train), ("en", "de"), "error", True, 64)
    pairs = [pair for sources, targets in source.chunks() for pair in zip(sources, targets)]
    matched = fuzzy_source(source, 60, 64, matched_pairs)
    augmented = [pair for sources, targets in matched.chunks() for pair in zip(sources, targets)]
    assert 0 < matched.count == len(augmented) < PAIRS  # only the pairs that have a match
    index, targets = MemoryIndex(pairs), dict(pairs)
    for text, target in augmented:
        sentence, _, match_target = text.partition(f" {FUZZY_PIECE} ")
        assert targets[sentence] == target  # the pair's own target, unchanged
        match = index.fuzzy_match(sentence, 60)
        assert match is not None and 60 <= match.score < 100 and match.target == match_target
        assert match.source != sentence
    assert [pair for pair in matched_pairs(pairs, 99) if pair] == []  # no near-duplicates at 99 in 400 captions


def test_a_plan_without_the_matcher_refuses_in_one_line(train: Path) -> None:
    corpora = [{"name": "plain", "train": str(train)}, {"name": "fuzzy", "train": str(train), "fuzzy_matches": 60}]
    cfg = PreprocessConfig("en", "de", corpora=corpora)
    with pytest.raises(UserError, match=r"^train.fuzzy: fuzzy_matches needs the translation memory's index"):
        plan_splits(cfg, 64)
    plan = plan_splits(cfg, 64, matched_pairs)
    assert plan.symbols() == [FUZZY_PIECE]  # reserved once, whichever corpus asks
    with pytest.raises(UserError, match="corpus fuzzy: fuzzy_matches must be 0 .off. to 99, got 100"):
        PreprocessConfig("en", "de", corpora=[{"name": "fuzzy", "train": str(train), "fuzzy_matches": 100}])


def test_preprocess_reserves_the_piece_and_writes_the_matched_sources(train: Path, tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        f"""[preprocess]
source_lang = "en"
target_lang = "de"
vocab_size = 600
[[preprocess.corpora]]
name = "plain"
train = "{train}"
[[preprocess.corpora]]
name = "fuzzy"
train = "{train}"
fuzzy_matches = 60
weight = 0.5
""",
        encoding="utf-8",
    )
    done = run_mtkit_in_process("preprocess", "--config", recipe, "--out", tmp_path / "data")
    assert done.returncode == 0, done.stderr
    tokenizer = load_tokenizer(tmp_path / "data" / "spm.model")
    piece = tokenizer.pieces().index(FUZZY_PIECE)
    assert (
        fuzzy_piece(tokenizer) == FUZZY_PIECE
        and tokenizer.encode([f"A dog {FUZZY_PIECE} Ein Hund"])[0].count(piece) == 1
    )
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    assert manifest["splits"]["train.plain"]["pairs"] == PAIRS
    assert 0 < manifest["splits"]["train.fuzzy"]["pairs"] < PAIRS
    data = ParallelData.open(tmp_path / "data", "train.fuzzy", "en", "de")
    assert all(piece in data.src(i).tolist() for i in range(len(data)))
