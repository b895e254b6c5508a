"""The lexical shortlist's counts, ranking and file: sentence counts of pieces and pairs, Dice before frequency,
CTranslate2's vocabulary-map lines, and a record that refuses a text it was not written with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mtkit.corpus.shortlist import ShortlistConfig, _chosen, candidates, count_pieces, vmap_text
from mtkit.corpus.shortlist_record import read_shortlist, write_shortlist
from mtkit.errors import UserError
from mtkit.file_names import SHORTLIST_INFO, SHORTLIST_NAME


class Pairs:
    """Sentence pairs as ParallelData offers them: src(i), tgt(i), len()."""

    def __init__(self, pairs: list[tuple[list[int], list[int]]]) -> None:
        self.pairs = [(np.array(s, np.uint16), np.array(t, np.uint16)) for s, t in pairs]

    def __len__(self) -> int:
        return len(self.pairs)

    def src(self, i: int) -> np.ndarray:
        return self.pairs[i][0]

    def tgt(self, i: int) -> np.ndarray:
        return self.pairs[i][1]


# source 1 always comes with target 5, and target 2 is in every sentence; source 3 with target 6 once
CORPUS = [([1, 1, 4], [2, 5, 5]), ([1], [2, 5]), ([4], [2, 7]), ([3, 4], [2, 6, 7])]


def test_counts_are_sentences_not_tokens() -> None:
    counts = count_pieces([Pairs(CORPUS[:2]), Pairs(CORPUS[2:])], vocab=8, target_vocab=8)
    assert counts.sentences == 4
    assert counts.source.tolist() == [0, 2, 0, 1, 3, 0, 0, 0]  # source 1 twice in sentence 1 counts once
    assert counts.target.tolist() == [0, 0, 4, 0, 0, 2, 1, 2]
    pairs = dict(zip(counts.pair_keys.tolist(), counts.pair_counts.tolist()))
    assert pairs[1 * 8 + 5] == 2 and pairs[1 * 8 + 2] == 2 and pairs[4 * 8 + 7] == 2 and pairs[3 * 8 + 6] == 1
    assert sorted(pairs) == counts.pair_keys.tolist()
    assert sum(pairs.values()) == sum(len(set(s)) * len(set(t)) for s, t in CORPUS)


def test_best_ranks_a_pieces_own_translation_above_the_frequent() -> None:
    counts = count_pieces([Pairs(CORPUS)], vocab=8, target_vocab=8)
    frequent, best = candidates(counts, ShortlistConfig(frequent=1, best=1))
    assert frequent.tolist() == [2]  # in all 4 sentences
    assert best[1].tolist() == [5]  # Dice 1.0 against target 2's 2*2/(2+4)
    assert best[3].tolist() == [6]
    assert best[4].tolist() == [2]  # with 2 in 3 of 3 sentences (6/7) more than with 7 in 2 of 3 (4/5)
    _, two = candidates(counts, ShortlistConfig(frequent=0, best=2))
    assert two[1].tolist() == [5, 2]
    assert two[3].tolist() == [6, 7]  # Dice 1 (6, seen once, with it), 2/3 (7), 2/5 (2)
    everything = candidates(counts, ShortlistConfig(frequent=8, best=8))
    assert everything[0].tolist() == [2, 5, 6, 7]  # every target seen (never 0, 1, 3, 4)
    assert sorted(everything[1][4].tolist()) == [2, 5, 6, 7]


def test_the_same_counts_give_the_same_list_whatever_the_order_of_sentences() -> None:
    forward = candidates(count_pieces([Pairs(CORPUS)], 8, 8), ShortlistConfig(frequent=2, best=2))
    backward = candidates(count_pieces([Pairs(CORPUS[::-1])], 8, 8), ShortlistConfig(frequent=2, best=2))
    assert forward[0].tolist() == backward[0].tolist()
    assert {k: v.tolist() for k, v in forward[1].items()} == {k: v.tolist() for k, v in backward[1].items()}


def test_max_pairs_spreads_over_the_corpus() -> None:
    assert _chosen(10, 3).tolist() == [0, 4, 9]
    assert _chosen(10, 0).tolist() == list(range(10))
    assert _chosen(3, 10).tolist() == [0, 1, 2]
    counts = count_pieces([Pairs(CORPUS)], 8, 8, max_pairs=2)
    assert counts.sentences == 2


def test_vmap_lines_are_ctranslate2s_format_with_the_piece_itself() -> None:
    pieces = ["<pad>", "▁a", "▁b", "▁c", "▁d", "▁e", "▁f", "▁g"]
    counts = count_pieces([Pairs(CORPUS)], 8, 8)
    frequent, best = candidates(counts, ShortlistConfig(frequent=1, best=1))
    lines = vmap_text(frequent, best, pieces, pieces).splitlines()
    assert lines[0] == "\t▁b"  # the empty key: always candidates
    assert "▁a\t▁e ▁a" in lines  # its best, then itself (a shared vocabulary copies names and numbers)
    assert "▁e\t▁e" in lines  # never in a source sentence: itself only
    assert all(line.count("\t") == 1 for line in lines)


def test_the_record_refuses_a_text_it_was_not_written_with(tmp_path: Path) -> None:
    assert read_shortlist(tmp_path) is None
    write_shortlist(tmp_path, "\t▁b\n▁a\t▁e\n", {"frequent": 1})
    info = read_shortlist(tmp_path)
    assert info is not None and info["frequent"] == 1 and len(info["sha256"]) == 64
    (tmp_path / SHORTLIST_NAME).write_text("\t▁b\n", encoding="utf-8")
    with pytest.raises(UserError, match="not the shortlist shortlist.json records"):
        read_shortlist(tmp_path)
    (tmp_path / SHORTLIST_NAME).unlink()
    with pytest.raises(UserError, match="unreadable shortlist record .*No such file"):
        read_shortlist(tmp_path)
    (tmp_path / SHORTLIST_INFO).write_text("{", encoding="utf-8")
    with pytest.raises(UserError, match="unreadable shortlist record"):
        read_shortlist(tmp_path)


def test_config_refuses_what_cannot_be_a_shortlist() -> None:
    with pytest.raises(UserError, match="--best"):
        ShortlistConfig(best=0)
    with pytest.raises(UserError, match="--frequent"):
        ShortlistConfig(frequent=-1)
