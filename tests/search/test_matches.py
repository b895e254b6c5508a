"""A fuzzy match rewarded in beam search (mtkit.search.matches) over the fake decoders of test_terms: a strong bonus
makes the search write the match itself, a weak one moves it towards the match's words and order, the log-prob a
hypothesis reports is the table's (no bonus in it), and a sentence without a match decodes as unguided search."""

from __future__ import annotations

import pytest
import torch

from mtkit.search.beam import beam_search, search
from mtkit.search.config import TranslateConfig
from mtkit.search.matches import MatchGuide, match_table
from mtkit.search.step import SearchBatch
from tests.search.test_beam import BOS, EOS, PAD, FakeDecoder, make_batch
from tests.search.test_terms import VOCAB, table_logprob, table_of

FUZZY = 11  # the sources' ｟fuzzy｠ piece
IDENTITY = torch.arange(VOCAB)


def matched(seed: int, sources: list[list[int]], cfg: TranslateConfig, word: float, order: float):
    table = table_of(seed)
    src, src_lens = make_batch(sources)
    matches = match_table(sources, FUZZY, IDENTITY)
    guide = None if matches is None else MatchGuide(matches, VOCAB, word, order)
    return table, search(FakeDecoder(table), SearchBatch(src, src_lens, PAD, BOS, EOS), cfg, guide)


SOURCES = [[3, 4, FUZZY, 5, 6, 7], [4, 5, 6, FUZZY, 8, 3, 8, 4], [6, 7, 8]]


@pytest.mark.parametrize("seed", range(5))
def test_a_strong_bonus_writes_the_match_and_reports_the_tables_logprob(seed: int) -> None:
    cfg = TranslateConfig(beam=4, nbest=2, max_len_a=1.0, max_len_b=4)
    table, results = matched(seed, SOURCES, cfg, 5.0, 10.0)
    # The random tables do not know where to end: what follows the match is theirs, the match is not written twice.
    assert results[0][0].tokens[:3] == [5, 6, 7] and results[1][0].tokens[:4] == [8, 3, 8, 4]
    assert results[0][0].tokens[3:6] != [5, 6, 7]
    for source, hyps in zip(SOURCES, results):
        for hyp in hyps:
            assert hyp.logprob == pytest.approx(table_logprob(table, tuple(source), hyp.tokens), abs=1e-4)


def test_a_sentence_without_a_match_decodes_as_unguided_search_in_the_same_batch() -> None:
    cfg = TranslateConfig(beam=4, nbest=2)
    table, results = matched(3, SOURCES, cfg, 5.0, 10.0)
    src, src_lens = make_batch([SOURCES[2]])
    alone = beam_search(FakeDecoder(table), SearchBatch(src, src_lens, PAD, BOS, EOS), cfg)
    assert [(h.tokens, h.logprob) for h in results[2]] == [(h.tokens, h.logprob) for h in alone[0]]


def test_a_weak_bonus_moves_the_search_towards_the_match() -> None:
    """Over many random tables, the match's words and word pairs are found more often with the bonus than without;
    the bonus counts the match's order more than its words alone."""
    cfg = TranslateConfig(beam=4, max_len_a=1.0, max_len_b=4)
    source, match = [3, 4, FUZZY, 5, 6, 7], [5, 6, 7]

    def pairs(tokens: list[int]) -> int:
        return sum(tokens[i : i + 2] == match[j : j + 2] for i in range(len(tokens)) for j in range(len(match) - 1))

    plain = guided = 0
    for seed in range(40):
        without = matched(seed, [source], cfg, 0.0, 0.0)[1][0][0].tokens
        with_bonus = matched(seed, [source], cfg, 0.5, 1.0)[1][0][0].tokens
        plain += pairs(without) + sum(token in match for token in without)
        guided += pairs(with_bonus) + sum(token in match for token in with_bonus)
    assert guided > plain * 1.5, (plain, guided)


def test_match_table_reads_what_follows_the_piece_mapped_to_target_ids() -> None:
    assert match_table([[3, 4], [5]], FUZZY, IDENTITY) is None
    to_target = torch.arange(VOCAB).flip(0)  # another vocabulary's order
    table = match_table([[3, FUZZY, 4, 5], [6]], FUZZY, to_target)
    assert table.tolist() == [[VOCAB - 1 - 4, VOCAB - 1 - 5], [-1, -1]]
