"""mtkit/corpus/alignments.py: eflomal's links symmetrized, the same for the same seed, obvious pairs found, and a
one-line error naming the extra when eflomal is missing."""

from __future__ import annotations

import re
import sys
from itertools import islice
from pathlib import Path

import pytest

from mtkit.corpus.alignments import (
    INSTALL_HINT,
    AlignConfig,
    align,
    align_files,
    grow_diag_final_and,
    iterations,
    parse_pharaoh,
    pharaoh,
)
from mtkit.errors import UserError
from mtkit.files import read_lines

DATA = Path(__file__).resolve().parents[2] / "data" / "multi30k"
PAIRS = 2000


def tokenized(lang: str) -> list[str]:
    """The first PAIRS training lines, punctuation split from words."""
    return [" ".join(re.findall(r"\w+|[^\w\s]", line)) for line in islice(read_lines(DATA / f"train.{lang}.gz"), PAIRS)]


def test_pharaoh_round_trip() -> None:
    assert parse_pharaoh("0-0 1-2 3-1") == [(0, 0), (1, 2), (3, 1)]
    assert pharaoh([(0, 0), (1, 2)]) == "0-0 1-2"
    assert parse_pharaoh("") == []


def test_grow_diag_final_and_by_hand() -> None:
    # intersection {(0,0)}; (1,1) is its diagonal neighbour in the union; (2,3) joins two unaligned words (final-and);
    # (0,5) is in the union but its source word is aligned and no aligned link is next to it, so it stays out.
    fwd = [(0, 0), (1, 1), (2, 3)]
    rev = [(0, 0), (0, 5)]
    assert grow_diag_final_and(fwd, rev) == [(0, 0), (1, 1), (2, 3)]
    assert grow_diag_final_and([], []) == []


def test_iterations_as_eflomal_chooses() -> None:
    assert iterations(2000, 1.0) == (28, 28, 112)  # what eflomal's Aligner passes its binary for 2,000 pairs


def test_config_refuses_bad_values() -> None:
    with pytest.raises(UserError, match="samplers"):
        AlignConfig(samplers=0)
    with pytest.raises(UserError, match="seed"):
        AlignConfig(seed=-1)


def test_same_seed_same_links_and_obvious_pairs(tmp_path: Path) -> None:
    pytest.importorskip("eflomal")
    src, tgt = tokenized("en"), tokenized("de")
    (tmp_path / "src").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "tgt").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    assert align_files(tmp_path / "src", tmp_path / "tgt", tmp_path / "a1") == PAIRS
    assert align_files(tmp_path / "src", tmp_path / "tgt", tmp_path / "a2") == PAIRS
    first = (tmp_path / "a1").read_text(encoding="utf-8")
    assert first == (tmp_path / "a2").read_text(encoding="utf-8")
    links = [parse_pharaoh(line) for line in first.splitlines()]
    assert len(links) == PAIRS
    found = {"dog": 0, "man": 0}
    expected = {"dog": "hund", "man": "mann"}
    for s, t, pair in zip(src, tgt, links, strict=True):
        words, target = s.lower().split(), t.lower().split()
        for i, j in pair:
            assert i < len(words) and j < len(target)
            if words[i] in found and target[j] == expected[words[i]]:
                found[words[i]] += 1
    assert found["dog"] >= 20 and found["man"] >= 100, found


def test_empty_pair_has_no_links() -> None:
    pytest.importorskip("eflomal")
    src = ["a dog runs", "", "a man"] * 20
    tgt = ["ein hund rennt", "", "ein mann"] * 20
    links = align(src, tgt)
    assert links[1] == [] and len(links) == len(src)


def test_missing_eflomal_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "eflomal", None)  # `import eflomal` now raises ImportError
    with pytest.raises(UserError) as caught:
        align(["a dog"], ["ein Hund"])
    assert str(caught.value) == INSTALL_HINT and "\n" not in INSTALL_HINT
    assert "pip install 'mtkit[align]'" in INSTALL_HINT
