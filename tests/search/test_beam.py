"""Search over fake decoders whose next-token log-probs are fixed tables of (source, prefix).

The fake state holds each row's source index and fed prefix, so a wrong reorder feeds the table the
wrong prefix and breaks the log-prob checks. Expected answers come from exhaustive enumeration or
plain Python loops over the same tables, never from golden numbers.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor

import mtkit.search.beam as search_module
from mtkit.errors import UserError
from mtkit.search.beam import _topk, beam_search, search
from mtkit.search.config import Hypothesis, TranslateConfig, length_penalty, min_length
from mtkit.search.sampling import greedy_search, sample_search
from mtkit.search.step import ModelDecoder, SearchBatch, combine, max_lengths, min_lengths

PAD, BOS, EOS, A, B = 0, 1, 2, 3, 4
VOCAB = 5
WORDS = (A, B)

Table = Callable[[tuple[int, ...], tuple[int, ...]], Tensor]  # (source, prefix) -> log-probs [V]


def random_table(seed: int, sharpness: float = 2.0, forbid_eos: bool = False, likely_pad: bool = False) -> Table:
    """A fixed random next-token distribution for every (source, prefix); bos impossible, pad too unless likely_pad."""
    cache: dict[tuple, Tensor] = {}

    def table(source: tuple[int, ...], prefix: tuple[int, ...]) -> Tensor:
        key = (seed, source, prefix)
        if key not in cache:
            generator = torch.Generator().manual_seed(hash(key) % 2**61)  # int tuples hash the same every run
            logits = torch.randn(VOCAB, generator=generator) * sharpness
            logits[PAD] = logits[BOS] = -math.inf
            if likely_pad:
                logits[PAD] = 4.0
            if forbid_eos:
                logits[EOS] = -math.inf
            cache[key] = logits.log_softmax(0)
        return cache[key]

    return table


def dict_table(probs: dict[tuple[int, ...], dict[int, float]], default: dict[int, float]) -> Table:
    """Hand-written next-token probabilities by prefix (the source is ignored)."""

    def table(source: tuple[int, ...], prefix: tuple[int, ...]) -> Tensor:
        p = torch.full((VOCAB,), 1e-9)
        for token, value in probs.get(prefix, default).items():
            p[token] = value
        return (p / p.sum()).log()

    return table


@dataclass
class FakeState:
    rows: Tensor  # [N] source index of each row
    prefix: Tensor  # [N, t] tokens fed so far, bos first


class FakeDecoder:
    """The search.Decoder contract over a table; records how many rows each step computed."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.step_rows: list[int] = []
        self.sources: list[tuple[int, ...]] = []

    def start(self, src: Tensor) -> FakeState:
        self.sources = [tuple(t for t in row if t not in (PAD, EOS)) for row in src.tolist()]
        self.step_rows = []
        return FakeState(torch.arange(src.size(0)), torch.zeros((src.size(0), 0), dtype=torch.long))

    def step(self, tokens: Tensor, state: FakeState) -> Tensor:
        assert tokens.shape == state.rows.shape
        state.prefix = torch.cat([state.prefix, tokens[:, None]], dim=1)
        assert bool((state.prefix[:, 0] == BOS).all())
        self.step_rows.append(len(tokens))
        rows = [self.table(self.sources[r], tuple(p[1:])) for r, p in zip(state.rows.tolist(), state.prefix.tolist())]
        return torch.stack(rows) if rows else torch.zeros((0, VOCAB))

    def log_probs(self, output: Tensor, rows: slice) -> Tensor:
        return output[rows].clone()

    def reorder(self, state: FakeState, order: Tensor) -> FakeState:
        return FakeState(state.rows[order], state.prefix[order])


def make_batch(sources: list[list[int]]) -> tuple[Tensor, Tensor]:
    """Right-padded src [B, S] with eos, and src_lens without eos."""
    width = max(len(s) for s in sources) + 1
    src = torch.full((len(sources), width), PAD)
    for i, s in enumerate(sources):
        src[i, : len(s) + 1] = torch.tensor(s + [EOS])
    return src, ((src != PAD) & (src != EOS)).sum(dim=1)  # the tokens that are neither pad nor eos


def sequence_logprob(table: Table, source: tuple[int, ...], tokens: list[int], max_len: int) -> float:
    """float32 sum in decoding order, the eos included (floored like search when forced and impossible)."""
    total = torch.zeros(())
    for i, token in enumerate(tokens + [EOS]):
        value = table(source, tuple(tokens[:i]))[token]
        if token == EOS and i == max_len:
            value = value.clamp(min=-1e4)
        total = total + value
    return float(total)


def exhaustive_best(table: Table, source: tuple[int, ...], max_len: int, alpha: float) -> float:
    """Best normalized score over every sequence of words of length min_length..max_len, then eos."""
    best = -math.inf
    for n in range(min_length(len(source), max_len), max_len + 1):
        for tokens in itertools.product(WORDS, repeat=n):
            logprob = sequence_logprob(table, source, list(tokens), max_len)
            best = max(best, logprob / length_penalty(n + 1, alpha))
    return best


def check_consistent(
    table: Table, sources: list[list[int]], results: list[list[Hypothesis]], cfg: TranslateConfig
) -> None:
    """Every hypothesis' log-prob and score agree with the table; sorted best first; within max length."""
    src_lens = torch.tensor([len(s) for s in sources])
    limits = max_lengths(src_lens, cfg.max_len_a, cfg.max_len_b).tolist()
    assert len(results) == len(sources)
    for source, hyps, limit in zip(sources, results, limits):
        assert 1 <= len(hyps) <= cfg.nbest
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for h in hyps:
            assert min_length(len(source), limit) <= len(h.tokens) <= limit and all(t in WORDS for t in h.tokens)
            assert h.logprob == pytest.approx(sequence_logprob(table, tuple(source), h.tokens, limit), abs=1e-4)
            assert h.score == pytest.approx(h.logprob / length_penalty(len(h.tokens) + 1, cfg.length_penalty), rel=1e-5)


def run(
    search_fn, table: Table, sources: list[list[int]], cfg: TranslateConfig, prefixes: Tensor | None = None
) -> list[list[Hypothesis]]:
    src, src_lens = make_batch(sources)
    return search_fn(FakeDecoder(table), SearchBatch(src, src_lens, PAD, BOS, EOS, prefixes=prefixes), cfg)


def test_length_penalty_by_hand() -> None:
    assert length_penalty(1, 0.6) == pytest.approx(1.0)
    assert length_penalty(4, 0.6) == pytest.approx(1.5**0.6)
    assert length_penalty(7, 1.0) == pytest.approx(2.0)
    assert length_penalty(13, 0.0) == 1.0
    values = length_penalty(torch.tensor([1, 4, 7]), 0.5)
    assert torch.allclose(values, torch.tensor([1.0, 1.5**0.5, 2.0**0.5]))


def test_max_lengths_by_hand() -> None:
    src_lens = torch.tensor([0, 3, 10])
    assert max_lengths(src_lens, 1.5, 1).tolist() == [1, 5, 16]  # floor(1.5 * 3 + 1) = 5
    assert max_lengths(src_lens, 1.2, 0).tolist() == [0, 3, 12]  # floor(12.000000000000002) in float math
    assert max_lengths(src_lens, 1.5, 1, max_positions=8).tolist() == [1, 5, 7]  # bos + 7 tokens fill 8 positions
    src, lens = make_batch([[A, B, A], [B]])
    assert lens.tolist() == [3, 1]


def test_min_lengths_by_hand() -> None:
    """One token for a non-empty source, none for an empty one, never over the maximum."""
    assert min_lengths(torch.tensor([0, 3, 10, 2]), torch.tensor([1, 5, 16, 0])).tolist() == [0, 1, 1, 0]
    assert [min_length(s, m) for s, m in ((0, 1), (3, 5), (2, 0))] == [0, 1, 0]


@pytest.mark.parametrize("search_fn", [greedy_search, beam_search, sample_search])
def test_an_end_of_sentence_never_wins_the_first_step_of_a_non_empty_source(search_fn) -> None:
    """An eos the model likes best at once (0.9) gives no empty translation: the search takes the next best token,
    at its own log-prob (not renormalised, as fairseq's --min-len), and goes on; an empty source and a maximum
    length of 0 still end at once."""
    table = dict_table({(): {EOS: 0.9, A: 0.06, B: 0.04}}, default={EOS: 0.98, A: 0.01, B: 0.01})
    cfg = TranslateConfig(beam=1 if search_fn is greedy_search else 2, nbest=2 if search_fn is beam_search else 1)
    cfg.sampling = search_fn is sample_search
    results = run(search_fn, table, [[A, B], []], cfg)
    assert all(h.tokens for h in results[0]) and results[1][0].tokens == []
    best = results[0][0]
    assert best.logprob == pytest.approx(sequence_logprob(table, (A, B), best.tokens, 10), abs=1e-5)
    if search_fn is not sample_search:
        assert best.tokens == [A] and best.logprob == pytest.approx(math.log(0.06 * 0.98), abs=1e-5)
    zero = run(search_fn, table, [[A, B]], TranslateConfig(beam=cfg.beam, max_len_a=0.0, max_len_b=0))
    assert zero[0][0].tokens == []


def test_config_rejects_bad_values() -> None:
    for bad in ({"beam": 0}, {"nbest": 5, "beam": 4}, {"top_p": 0.0}, {"temperature": 0.0}, {"max_len_b": -1}):
        with pytest.raises(UserError):
            TranslateConfig(**bad)
    assert TranslateConfig(sampling=True, nbest=5, beam=1).nbest == 5


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0, -0.5])
def test_large_beam_equals_exhaustive_search(alpha: float) -> None:
    # 2 words, at most 5 tokens: beam 48 holds every prefix and candidate, so the search is exact and
    # checks bookkeeping, reorder and normalization. check_consistent ties hyps[0].score to its tokens'
    # table log-prob, so equal best scores mean the returned tokens are an optimum.
    cfg = TranslateConfig(beam=48, nbest=3, length_penalty=alpha, early_stop=False, max_len_a=1.0, max_len_b=0)
    sources = [[A, B, A, B, A], [B, B], [A, A, B, B], [A]]
    for seed in range(12):
        table = random_table(seed)
        results = run(beam_search, table, sources, cfg)
        check_consistent(table, sources, results, cfg)
        for source, hyps in zip(sources, results):
            assert hyps[0].score == pytest.approx(exhaustive_best(table, tuple(source), len(source), alpha), rel=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0, -1.0])
def test_no_early_stop_equals_searching_to_max_length(alpha: float, monkeypatch: pytest.MonkeyPatch) -> None:
    # early_stop=False may stop a sentence only when no live beam can still enter its best K, so the
    # best K must equal those of a search that runs every sentence to its max length.
    cfg = TranslateConfig(beam=3, nbest=3, length_penalty=alpha, early_stop=False, max_len_a=1.0, max_len_b=2)
    sources = [[A, B, A, B, A, B, A], [B, B], [A, A, B, B, A], [A]]
    saved_rows = 0
    for seed in range(40):
        table = random_table(seed, sharpness=1.5)
        src, src_lens = make_batch(sources)
        decoder = FakeDecoder(table)
        stopped = beam_search(decoder, SearchBatch(src, src_lens, PAD, BOS, EOS), cfg)
        with monkeypatch.context() as patch:
            patch.setattr(
                search_module, "_sentences_done", lambda fin, scores, t, max_len, cfg, ahead=None: max_len <= t
            )
            full_decoder = FakeDecoder(table)
            full = beam_search(full_decoder, SearchBatch(src, src_lens, PAD, BOS, EOS), cfg)
        assert stopped == full
        saved_rows += sum(full_decoder.step_rows) - sum(decoder.step_rows)
    assert saved_rows > 0  # the bound did stop some sentences early


def test_broken_reorder_is_caught() -> None:
    class Broken(FakeDecoder):
        def reorder(self, state: FakeState, order: Tensor) -> FakeState:
            return super().reorder(state, order.flip(0))

    table, sources = random_table(3), [[A, B, A, B], [B, A, A]]
    cfg = TranslateConfig(beam=4, nbest=4, max_len_b=2)
    src, src_lens = make_batch(sources)
    results = beam_search(Broken(table), SearchBatch(src, src_lens, PAD, BOS, EOS), cfg)
    with pytest.raises(AssertionError):
        check_consistent(table, sources, results, cfg)


def test_beam_finds_what_greedy_misses() -> None:
    # Greedy takes A (0.6) then A (0.36) then eos (0.98): p = 0.21. Beam 2 also keeps B, and B eos has p = 0.36.
    table = dict_table(
        {(): {A: 0.6, B: 0.4}, (A,): {A: 0.36, B: 0.34, EOS: 0.3}, (B,): {EOS: 0.9, A: 0.05, B: 0.05}},
        default={EOS: 0.98, A: 0.01, B: 0.01},
    )
    cfg = TranslateConfig(beam=2, length_penalty=0.0, max_len_b=5, max_len_a=0.0)
    greedy = run(search, table, [[A]], TranslateConfig(beam=1, length_penalty=0.0, max_len_b=5, max_len_a=0.0))
    beam = run(search, table, [[A]], cfg)
    assert greedy[0][0].tokens == [A, A]
    assert greedy[0][0].logprob == pytest.approx(math.log(0.6 * 0.36 * 0.98), abs=1e-5)
    assert beam[0][0].tokens == [B] and beam[0][0].logprob == pytest.approx(math.log(0.4 * 0.9), abs=1e-5)


def python_greedy(table: Table, source: tuple[int, ...], max_len: int) -> list[int]:
    tokens: list[int] = []
    while True:
        logp = table(source, tuple(tokens))
        if len(tokens) < min_length(len(source), max_len):
            logp = logp.clone().index_fill_(0, torch.tensor([EOS]), -math.inf)
        token = EOS if len(tokens) == max_len else int(logp.argmax())
        if token == EOS:
            return tokens
        tokens.append(token)


def test_beam_one_equals_python_greedy_loop() -> None:
    sources = [[A, B, A, B, A, B], [B], [A, A, B], []]
    cfg = TranslateConfig(beam=1, max_len_a=1.0, max_len_b=1)
    for seed in range(10):
        table = random_table(seed, sharpness=1.0)
        expected = [python_greedy(table, tuple(s), len(s) + 1) for s in sources]
        for search_fn in (greedy_search, beam_search, search):
            results = run(search_fn, table, sources, cfg)
            check_consistent(table, sources, results, cfg)
            assert [hyps[0].tokens for hyps in results] == expected


@pytest.mark.parametrize("early_stop", [True, False])
@pytest.mark.parametrize("beam", [1, 3])
def test_batched_equals_alone_in_any_order(beam: int, early_stop: bool) -> None:
    sources = [[A, B, A, B, A, B, A], [B], [A, A, B], [B, A], [A, B, B, A, A]]
    cfg = TranslateConfig(beam=beam, nbest=beam, early_stop=early_stop, max_len_a=1.0, max_len_b=2)
    for seed in range(4):
        table = random_table(seed, sharpness=1.5)
        alone = [run(search, table, [s], cfg)[0] for s in sources]
        assert run(search, table, sources, cfg) == alone
        order = torch.randperm(len(sources), generator=torch.Generator().manual_seed(seed)).tolist()
        assert run(search, table, [sources[i] for i in order], cfg) == [alone[i] for i in order]


@pytest.mark.parametrize("beam", [1, 3])
def test_never_eos_ends_at_max_length_and_drops_finished_rows(beam: int) -> None:
    sources = [[A], [A, B, A, B], [B, B]]
    cfg = TranslateConfig(beam=beam, nbest=beam, max_len_a=1.0, max_len_b=1)
    table = random_table(7, forbid_eos=True)
    src, src_lens = make_batch(sources)
    decoder = FakeDecoder(table)
    results = search(decoder, SearchBatch(src, src_lens, PAD, BOS, EOS), cfg)
    for source, hyps in zip(sources, results):
        assert len(hyps) == beam and all(len(h.tokens) == len(source) + 1 for h in hyps)
    # Max lengths 2, 5, 3: a sentence's rows leave the batch after its forced eos at step max_len; step 0
    # decodes one row per sentence (its beams are all bos then), later steps one per beam.
    assert decoder.step_rows == [(beam if t else 1) * sum(t <= m for m in (2, 5, 3)) for t in range(6)]
    clipped = search(FakeDecoder(table), SearchBatch(src, src_lens, PAD, BOS, EOS, 3), cfg)
    assert [len(hyps[0].tokens) for hyps in clipped] == [2, 2, 2]


@pytest.mark.parametrize("beam", [1, 3])
def test_pad_is_never_emitted(beam: int) -> None:
    sources = [[A, B, A], [B]]
    cfg = TranslateConfig(beam=beam, nbest=beam, max_len_a=1.0, max_len_b=1)
    table = random_table(5, likely_pad=True)
    check_consistent(table, sources, run(search, table, sources, cfg), cfg)  # tokens are words only


def test_nbest_distinct_sorted_and_bounded_by_beam() -> None:
    sources = [[A, B, A, B], [B, A]]
    cfg = TranslateConfig(beam=5, nbest=3, max_len_a=1.0, max_len_b=1)
    for seed in range(5):
        table = random_table(seed, sharpness=1.0)
        results = run(beam_search, table, sources, cfg)
        check_consistent(table, sources, results, cfg)
        for hyps in results:
            assert len(hyps) == 3 and len({tuple(h.tokens) for h in hyps}) == 3
        wider = run(beam_search, table, sources, TranslateConfig(beam=5, nbest=5, max_len_a=1.0, max_len_b=1))
        assert [hyps[:3] for hyps in wider] == results


def test_sampling_reproducible_and_within_top_k() -> None:
    sources = [[A, B, A, B, A, B], [B, A, A], [A]]
    table = random_table(11, sharpness=0.5)  # flat: many tokens are likely, so top-k matters
    cfg = TranslateConfig(sampling=True, top_k=2, nbest=8, seed=5, max_len_a=1.0, max_len_b=2)
    first = run(sample_search, table, sources, cfg)
    assert run(search, table, sources, cfg) == first
    check_consistent(table, sources, first, cfg)
    for source, hyps in zip(sources, first):
        for h in hyps:
            for i, token in enumerate(h.tokens + [EOS]):
                if i < len(source) + 2:  # before the forced eos
                    logp = table(tuple(source), tuple(h.tokens[:i]))
                    if i == 0:  # no eos at the first step: the top 2 of the others
                        logp = logp.clone().index_fill_(0, torch.tensor([EOS]), -math.inf)
                    assert token in logp.topk(2).indices.tolist()


def test_sampling_top_k_one_and_tiny_top_p_are_greedy() -> None:
    sources = [[A, B, A, B], [B], [A, A, B]]
    for seed in range(4):
        table = random_table(seed)
        expected = [python_greedy(table, tuple(s), len(s) + 1) for s in sources]
        for cfg in (
            TranslateConfig(sampling=True, top_k=1, temperature=3.0, seed=seed, max_len_a=1.0, max_len_b=1),
            TranslateConfig(sampling=True, top_p=1e-6, seed=seed, max_len_a=1.0, max_len_b=1),
        ):
            assert [hyps[0].tokens for hyps in run(search, table, sources, cfg)] == expected


@pytest.mark.parametrize("width", [4 * 8000, 4 * 1000, 3 * 7919, 130])
def test_blockwise_topk_equals_torch_topk(width: int) -> None:
    """Values and indices of torch.topk: blocks (128 wide for 32,000 columns), fallbacks for a prime width
    (no block size divides it) and for fewer blocks than k; rows with -inf (dead beams) included."""
    x = torch.randn(37, width, generator=torch.Generator().manual_seed(width)) * 4
    x[3] = -math.inf
    x[5, : width // 2] = -math.inf
    x[7, ::3] = 50.0 + torch.arange(len(x[7, ::3]), dtype=x.dtype)  # the top values spread over many blocks
    for k in (1, 8):
        top, index = _topk(x, k)
        expected = x.topk(k, dim=1)
        assert torch.equal(top, expected.values)
        finite = torch.isfinite(expected.values)
        assert torch.equal(index[finite], expected.indices[finite])
        assert torch.equal(x.gather(1, index), top)


def test_model_decoder_log_probs_are_normalized() -> None:
    """The in-place log-softmax gives F.log_softmax of the model's logits."""

    class Logits:
        def __init__(self) -> None:
            self.last = torch.randn(6, 50, generator=torch.Generator().manual_seed(1)) * 5

        def decode_hidden(self, tokens: torch.Tensor, state: None) -> torch.Tensor:
            return torch.arange(len(tokens))

        def project(self, hidden: torch.Tensor) -> torch.Tensor:
            return self.last[hidden].clone()

    model = Logits()
    decoder = ModelDecoder([model])
    output = decoder.step(torch.zeros(6, dtype=torch.long), [None])
    torch.testing.assert_close(
        decoder.log_probs(output, slice(None)), torch.log_softmax(model.last, dim=-1), rtol=0, atol=1e-6
    )
    torch.testing.assert_close(
        decoder.log_probs(output, slice(2, 5)), torch.log_softmax(model.last[2:5], dim=-1), rtol=0, atol=1e-6
    )


def logprob_after(table: Table, source: tuple[int, ...], tokens: list[int], start: int, max_len: int) -> float:
    """sequence_logprob without the first `start` tokens' terms: a forced prefix scores nothing."""
    total = torch.zeros(())
    for i, token in enumerate(tokens + [EOS]):
        if i >= start:
            value = table(source, tuple(tokens[:i]))[token]
            total = total + (value.clamp(min=-1e4) if token == EOS and i == max_len else value)
    return float(total)


@pytest.mark.parametrize("search_fn,beam", [(beam_search, 3), (greedy_search, 1), (sample_search, 1)])
def test_a_forced_prefix_begins_every_hypothesis_and_scores_nothing(search_fn, beam: int) -> None:
    """Each hypothesis starts with its sentence's prefix, which adds nothing to its log-prob; a prefix longer than
    the maximum length raises it; a sentence without a prefix gets what it gets without prefixes (beam, greedy)."""
    sampling = search_fn is sample_search
    cfg = TranslateConfig(
        beam=beam, nbest=2 if sampling else beam, max_len_a=1.0, max_len_b=1, length_penalty=0.6, sampling=sampling
    )
    sources = [[A, B, A], [B, B, A, A], [A]]
    prefix_lists = [[B, A], [], [A, A, B, B]]  # the last is longer than its maximum (2)
    prefixes = torch.full((3, 4), -1)
    for row, tokens in enumerate(prefix_lists):
        prefixes[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
    for seed in range(3):
        table = random_table(seed)
        forced = run(search_fn, table, sources, cfg, prefixes=prefixes)
        plain = run(search_fn, table, sources, cfg)
        for source, prefix, hyps in zip(sources, prefix_lists, forced):
            limit = max(len(source) + 1, len(prefix))
            for h in hyps:
                assert h.tokens[: len(prefix)] == prefix and len(h.tokens) <= limit
                expected = logprob_after(table, tuple(source), h.tokens, len(prefix), limit)
                assert h.logprob == pytest.approx(expected, abs=1e-4)
        if not sampling:
            assert [(h.tokens, h.score) for h in forced[1]] == [(h.tokens, h.score) for h in plain[1]]


def test_an_ensemble_combines_linearly_or_log_linearly() -> None:
    """linear: the log of the mean of the members' probabilities; log-linear: the mean of their log-probabilities.
    They differ where the members disagree, and one member is its own."""
    a = torch.log_softmax(torch.tensor([[2.0, 0.0, -1.0]]), dim=-1)
    b = torch.log_softmax(torch.tensor([[-1.0, 0.0, 3.0]]), dim=-1)
    linear = combine([a, b], "linear")
    assert torch.allclose(linear.exp(), (a.exp() + b.exp()) / 2)
    assert torch.allclose(linear.exp().sum(), torch.tensor(1.0))  # still a distribution
    assert torch.equal(combine([a, b]), (a + b) / 2)  # log-linear, the default
    assert not torch.allclose(linear, combine([a, b]))
    assert combine([a]) is a and combine([a], "linear") is a
