"""The guided search (mtkit.search.terms) over fake decoders whose next-token log-probs are fixed random tables: every
hypothesis holds every term of its sentence as consecutive tokens, a term's word does not run on, the log-prob a
hypothesis reports is the table's (no bonus in it), and a sentence without terms decodes as unguided search does."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from mtkit.search.beam import beam_search, search
from mtkit.search.config import Hypothesis, TranslateConfig
from mtkit.search.step import SearchBatch
from mtkit.search.terms import TermGuide, term_table
from tests.search.test_beam import BOS, EOS, PAD, FakeDecoder, make_batch

VOCAB = 12
CONTINUES = (9, 10, 11)  # pieces that continue a word (no leading ▁)


def table_of(seed: int):
    cache: dict[tuple, Tensor] = {}

    def table(source: tuple[int, ...], prefix: tuple[int, ...]) -> Tensor:
        key = (seed, source, prefix)
        if key not in cache:
            generator = torch.Generator().manual_seed(hash(key) % 2**61)
            logits = torch.randn(VOCAB, generator=generator) * 2.0
            logits[PAD] = logits[BOS] = -math.inf
            cache[key] = logits.log_softmax(0)
        return cache[key]

    return table


def guided(seed: int, sources: list[list[int]], terms: list[list[list[int]]], cfg: TranslateConfig):
    table = table_of(seed)
    src, src_lens = make_batch(sources)
    continues = torch.zeros(VOCAB, dtype=torch.bool)
    continues[list(CONTINUES)] = True
    table_ids = term_table(terms, torch.device("cpu"))
    guide = None if table_ids is None else TermGuide(table_ids, continues)
    results = search(FakeDecoder(table), SearchBatch(src, src_lens, PAD, BOS, EOS), cfg, guide)
    return table, results


def holds(tokens: list[int], term: list[int]) -> bool:
    return any(tokens[i : i + len(term)] == term for i in range(len(tokens) - len(term) + 1))


def table_logprob(table, source: tuple[int, ...], tokens: list[int]) -> float:
    total = torch.zeros(())
    for i, token in enumerate(tokens + [EOS]):
        total = total + table(source, tuple(tokens[:i]))[token]
    return float(total)


TERM_SETS = [
    [[3]],  # one token
    [[4, 9]],  # a word and its continuation
    [[3, 10], [5]],  # two terms
    [[6, 9, 10], [6]],  # the same first token: the longer, then the shorter is begun by its own token again
    [[7, 3], [8]],
]


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("seed", range(6))
def test_every_hypothesis_holds_its_terms_and_reports_the_tables_logprob(seed: int, beam: int) -> None:
    sources = [[3, 4, 5, 6, 7], [4, 5], [6, 7, 8, 3], [5, 5, 5, 5, 5, 5], [8, 3, 4]]
    cfg = TranslateConfig(beam=beam, nbest=beam, max_len_a=1.0, max_len_b=8)
    table, results = guided(seed, sources, TERM_SETS, cfg)
    for source, terms, hyps in zip(sources, TERM_SETS, results):
        assert hyps
        for hyp in hyps:
            assert all(holds(hyp.tokens, term) for term in terms), (hyp.tokens, terms)
            assert hyp.logprob == pytest.approx(table_logprob(table, tuple(source), hyp.tokens), abs=1e-4)
            for term in terms:  # the term's word does not run on
                ends = [i + len(term) for i in range(len(hyp.tokens)) if hyp.tokens[i : i + len(term)] == term]
                assert any(end == len(hyp.tokens) or hyp.tokens[end] not in CONTINUES for end in ends), hyp.tokens


def test_a_sentence_without_terms_decodes_as_unguided_search_in_the_same_batch() -> None:
    sources = [[3, 4, 5], [6, 7, 8, 3], [4, 4]]
    cfg = TranslateConfig(beam=4, nbest=2)
    table, results = guided(7, sources, [[[5, 9]], [], [[8]]], cfg)
    src, src_lens = make_batch([sources[1]])
    alone = beam_search(FakeDecoder(table), SearchBatch(src, src_lens, PAD, BOS, EOS), cfg)
    assert [(h.tokens, h.logprob) for h in results[1]] == [(h.tokens, h.logprob) for h in alone[0]]
    assert all(holds(h.tokens, [5, 9]) for h in results[0]) and all(8 in h.tokens for h in results[2])


def test_no_terms_is_unguided_search() -> None:
    assert term_table([[], []], torch.device("cpu")) is None
    assert term_table([[[]], []], torch.device("cpu")) is None


def test_terms_that_cannot_fit_still_end_at_the_maximum_length() -> None:
    """Three terms of three tokens in at most 4 tokens: every sentence still gets an output, cut at its maximum."""
    cfg = TranslateConfig(beam=4, max_len_a=0.0, max_len_b=4)
    _, results = guided(3, [[3, 4]], [[[3, 9, 10], [4, 10, 9], [5, 9, 9]]], cfg)
    assert results[0] and all(len(h.tokens) <= 4 for h in results[0])
    assert isinstance(results[0][0], Hypothesis)


@pytest.mark.parametrize("seed", range(3))
def test_a_guided_sentence_decodes_alone_as_in_its_batch(seed: int) -> None:
    sources = [[3, 4, 5, 6, 7], [4, 5], [6, 7, 8, 3], [5, 5, 5, 5, 5, 5], [8, 3, 4]]
    cfg = TranslateConfig(beam=4, nbest=4, max_len_a=1.0, max_len_b=8)
    _, together = guided(seed, sources, TERM_SETS, cfg)
    for source, terms, hyps in zip(sources, TERM_SETS, together):
        _, alone = guided(seed, [source], [terms], cfg)
        assert [(h.tokens, h.logprob, h.score) for h in alone[0]] == [(h.tokens, h.logprob, h.score) for h in hyps]


def test_the_guided_bound_stops_sentences_early_with_the_same_best(monkeypatch: pytest.MonkeyPatch) -> None:
    """With one hypothesis asked, a sentence stops once its best finished beats what any live beam can still reach,
    bonuses included: the same best as waiting for K finished, in fewer decoder rows."""
    import mtkit.search.beam as search_module

    sources = [[3, 4, 5, 6, 7], [4, 5], [6, 7, 8, 3], [5, 5, 5, 5, 5, 5], [8, 3, 4]]
    cfg = TranslateConfig(beam=4, nbest=1, max_len_a=1.0, max_len_b=8)
    src, src_lens = make_batch(sources)
    continues = torch.zeros(VOCAB, dtype=torch.bool)
    continues[list(CONTINUES)] = True
    done = search_module._sentences_done
    saved = 0
    for seed in range(12):
        runs = []
        for bounded in (True, False):
            decoder = FakeDecoder(table_of(seed))
            guide = TermGuide(term_table(TERM_SETS, torch.device("cpu")), continues)
            with monkeypatch.context() as patch:
                if not bounded:  # only K finished stops a sentence
                    patch.setattr(search_module, "_sentences_done", lambda *args, ahead=None: done(*args[:5]))
                found = search(decoder, SearchBatch(src, src_lens, PAD, BOS, EOS), cfg, guide)
            runs.append(([(h.tokens, h.logprob, h.score) for hyps in found for h in hyps], sum(decoder.step_rows)))
        assert runs[0][0] == runs[1][0]
        saved += runs[1][1] - runs[0][1]
    assert saved > 0


def test_a_live_beam_with_bonuses_ahead_keeps_its_sentence_searching() -> None:
    from mtkit.search.beam import _sentences_done

    cfg = TranslateConfig(beam=2, nbest=1, length_penalty=0.0)
    finished = torch.tensor([[-1.0, -math.inf]])  # one finished hypothesis, normalized score -1
    live = torch.tensor([[-3.0, -4.0]])  # raw scores of the live beams
    max_len = torch.tensor([10])
    assert bool(_sentences_done(finished, live, 3, max_len, cfg, torch.zeros(1, 2)))  # nothing can beat -1
    assert not bool(_sentences_done(finished, live, 3, max_len, cfg, torch.tensor([[8.0, 0.0]])))  # -3 + 8 can
    assert not bool(_sentences_done(finished, live, 3, max_len, cfg))  # unguided: K finished, as before


STOP = 7  # a piece that closes a sentence ("." alone or at a piece's end)


def closing_table(source: tuple[int, ...], prefix: tuple[int, ...]) -> Tensor:
    """A model that closes its sentence after one word and would write the term (5) only after the full stop."""
    logp = torch.full((VOCAB,), -20.0)
    logp[PAD] = logp[BOS] = -math.inf
    chosen = {(): {3: -0.1}, (3,): {STOP: -0.05, 5: -12.0, EOS: -8.0}, (3, STOP): {EOS: -0.05, 5: -6.0}}
    chosen |= {(3, 5): {STOP: -0.1}, (3, 5, STOP): {EOS: -0.01}, (3, STOP, 5): {EOS: -0.1}}
    for token, value in chosen.get(prefix, {EOS: -0.01}).items():
        logp[token] = value
    return logp


@pytest.mark.parametrize("held", [False, True])
def test_a_term_goes_before_the_full_stop_not_after_it(held: bool) -> None:
    """Without the rule the term's bonus pays after the stop (3 . 5); held back as ending is while the term is unmet,
    the stop comes after it (3 5 .), and the log-prob reported is the model's, the stop's cost not in it."""
    src, src_lens = make_batch([[3, 4, 5]])
    stops = torch.zeros(VOCAB, dtype=torch.bool)
    stops[STOP] = True
    continues = torch.zeros(VOCAB, dtype=torch.bool)
    guide = TermGuide(term_table([[[5]]], torch.device("cpu")), continues, ends_sentence=stops if held else None)
    cfg = TranslateConfig(beam=2, nbest=1, length_penalty=0.0)
    best = search(FakeDecoder(closing_table), SearchBatch(src, src_lens, PAD, BOS, EOS), cfg, guide)[0][0]
    assert best.tokens == ([3, 5, STOP] if held else [3, STOP, 5])
    assert best.logprob == pytest.approx(table_logprob(closing_table, (3, 4, 5), best.tokens), abs=1e-4)


@pytest.mark.parametrize("seed", range(4))
def test_with_stops_held_back_every_hypothesis_still_holds_its_terms_at_the_tables_logprob(seed: int) -> None:
    """The rule on random tables (the stop piece also begins one term): terms held, log-probs the table's, and a
    sentence without terms decodes as unguided search does."""
    sources = [[3, 4, 5, 6, 7], [4, 5], [6, 7, 8, 3], [5, 5, 5, 5, 5, 5], [8, 3, 4]]
    terms = [*TERM_SETS[:4], []]
    table = table_of(seed)
    src, src_lens = make_batch(sources)
    continues, stops = torch.zeros(VOCAB, dtype=torch.bool), torch.zeros(VOCAB, dtype=torch.bool)
    continues[list(CONTINUES)] = True
    stops[[STOP, 8]] = True
    guide = TermGuide(term_table(terms, torch.device("cpu")), continues, ends_sentence=stops)
    cfg = TranslateConfig(beam=4, nbest=4, max_len_a=1.0, max_len_b=8)
    results = search(FakeDecoder(table), SearchBatch(src, src_lens, PAD, BOS, EOS), cfg, guide)
    for source, sentence_terms, hyps in zip(sources, terms, results):
        assert hyps
        for hyp in hyps:
            assert all(holds(hyp.tokens, term) for term in sentence_terms), (hyp.tokens, sentence_terms)
            assert hyp.logprob == pytest.approx(table_logprob(table, tuple(source), hyp.tokens), abs=1e-4)
    one, one_lens = make_batch([sources[-1]])
    alone = beam_search(FakeDecoder(table), SearchBatch(one, one_lens, PAD, BOS, EOS), cfg)
    assert [(h.tokens, h.logprob) for h in results[-1]] == [(h.tokens, h.logprob) for h in alone[0]]
