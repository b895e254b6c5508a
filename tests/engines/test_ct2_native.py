"""--ct2-search native: CTranslate2's own search, token for token what one translate_batch call with mtkit's settings
mapped onto its options gives; the option reaches the engine from `mtkit translate` and `mtkit serve`, and the torch
engine refuses it in one line."""

from __future__ import annotations

import math
from pathlib import Path

import ctranslate2
import pytest

from mtkit.engines.ct2 import RAW_SCORES, CT2Translator, search_options
from mtkit.engines.ct2_cache import model_directory
from mtkit.engines.ct2_setup import default_threads
from mtkit.engines.factory import EXPORT_ON_FIRST_USE
from mtkit.errors import UserError
from mtkit.search.config import MIN_LENGTH, TranslateConfig
from tests.engines.test_ct2 import mtkit

SETTINGS = [  # beam, alpha, max_len_a, max_len_b, nbest
    dict(beam=4, length_penalty=0.6, max_len_a=1.0, max_len_b=50, nbest=2),
    dict(beam=1, length_penalty=0.0, max_len_a=1.0, max_len_b=50, nbest=1),
    dict(beam=5, length_penalty=1.0, max_len_a=0.5, max_len_b=2, nbest=3),  # most sentences end at the maximum
    dict(sampling=True, top_k=10, nbest=2, seed=3),
]


@pytest.fixture(scope="module", autouse=True)
def exported(run: Path) -> Path:
    """The run's export cache, made once: CT2Translator.load without an exporter takes only a warm cache."""
    return model_directory(run, EXPORT_ON_FIRST_USE)


def direct(run: Path, sources: list[list[str]], targets: list[list[str]], cfg: TranslateConfig) -> list[list]:
    """(pieces, score) per hypothesis per sentence from translate_batch called as docs/translating.md says native
    mode calls it: one call for the sentences without a prefix and one for those with, each sorted by length,
    at the longest floor(a * source + b) (or prefix) of the call, CTranslate2's length penalty alpha, the n best."""
    translator = ctranslate2.Translator(str(run / "ctranslate2"), device="cpu", intra_threads=default_threads(1))
    found: list[list] = [[] for _ in sources]
    for with_prefix in (False, True):
        order = sorted((i for i, t in enumerate(targets) if bool(t) == with_prefix), key=lambda i: (len(sources[i]), i))
        if not order:
            continue
        steps = max(max(math.floor(cfg.max_len_a * len(sources[i]) + cfg.max_len_b), len(targets[i])) for i in order)
        options = {"beam_size": cfg.beam, "num_hypotheses": cfg.nbest, "length_penalty": cfg.length_penalty}
        if cfg.sampling:
            ctranslate2.set_random_seed(cfg.seed)
            options = {
                "beam_size": 1,
                "num_hypotheses": cfg.nbest,
                "length_penalty": cfg.length_penalty,
                "sampling_topk": cfg.top_k,
                "sampling_topp": cfg.top_p,
                "sampling_temperature": cfg.temperature,
            }
        results = translator.translate_batch(
            [sources[i] for i in order],
            [targets[i] for i in order] if with_prefix else None,
            max_decoding_length=steps,
            min_decoding_length=MIN_LENGTH,  # no empty translation of a non-empty source
            max_input_length=0,
            return_scores=True,
            **options,
        )
        for i, result in zip(order, results):  # a beam that died behind a prefix scores about -1e10: none
            found[i] = [(h, s) for h, s in zip(result.hypotheses, result.scores) if s > -1e6]
    return found


@pytest.mark.parametrize("options", SETTINGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_native_search_is_one_translate_batch_call(
    run: Path, lines: list[str], prefixes: list[str], options: dict
) -> None:
    engine = CT2Translator.load(run, device="cpu", native=True, batch_tokens=100_000, **options)  # one batch
    found = engine.translate_hypotheses(lines, prefixes=prefixes)
    sources = [[engine.pieces[i] for i in ids] for ids in engine.encode_lines(lines)]
    targets = [[engine.target_pieces[i] for i in ids] for ids in engine.tokenizer.encode_target(prefixes)]
    expected = direct(run, sources, targets, engine.cfg)
    assert [[([engine.target_pieces[i] for i in h.tokens], h.score) for h in hyps] for hyps in found] == expected
    assert all(len(hyps) == engine.cfg.nbest for hyps in found[::4])  # lines without a prefix: the n best
    texts = engine.tokenizer.decode([hyps[0].tokens for hyps in found])
    assert all(text.startswith(prefix) for text, prefix in zip(texts, prefixes))


def test_one_sentence_per_batch_is_one_call_per_sentence(run: Path, lines: list[str]) -> None:
    """One sentence per call equals one call per sentence; results do depend on the batch (padding), so nothing
    more is promised; the same input gives the same output."""
    engine = CT2Translator.load(run, device="cpu", native=True, batch_tokens=1, beam=3, nbest=2)
    found = engine.translate_hypotheses(lines[:12])
    sources = [[engine.pieces[i] for i in ids] for ids in engine.encode_lines(lines[:12])]
    expected = [direct(run, [source], [[]], engine.cfg)[0] for source in sources]
    assert [[([engine.target_pieces[i] for i in h.tokens], h.score) for h in hyps] for hyps in found] == expected
    assert engine.translate_hypotheses(lines[:12]) == found


def test_search_options_map_mtkit_settings() -> None:
    beam = TranslateConfig(beam=5, length_penalty=0.6, nbest=2)
    fixed = {"min_decoding_length": 1, "max_input_length": 0, "return_scores": True}
    assert search_options(beam, native=True) == {**fixed, "length_penalty": 0.6, "beam_size": 5, "num_hypotheses": 2}
    assert search_options(beam, native=False) == {  # exact: 0 at first (CT2Translator.search_ids)
        **fixed,
        "min_decoding_length": 0,
        "length_penalty": RAW_SCORES,
        "beam_size": 5,
        "num_hypotheses": 5,
    }
    sampling = TranslateConfig(sampling=True, top_k=10, top_p=0.9, temperature=0.7, nbest=3, length_penalty=0.0)
    assert search_options(sampling, native=True) == {
        **fixed,
        "length_penalty": 0.0,
        "beam_size": 1,
        "num_hypotheses": 3,
        "sampling_topk": 10,
        "sampling_topp": 0.9,
        "sampling_temperature": 0.7,
    }


def test_the_option_reaches_the_engine(run: Path, lines: list[str]) -> None:
    text = "\n".join(lines[:10] + [""]) + "\n"
    args = ("translate", str(run), "--engine", "ctranslate2", "--ct2-search", "native", "--no-guard", "-q")
    found = mtkit(*args, stdin=text)  # the raw line path, as the engine's own translate
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines() == CT2Translator.load(run, device="cpu", native=True).translate(lines[:10] + [""])
    from mtkit.engines.config import EngineConfig
    from mtkit.serve.config import ServeConfig
    from mtkit.serve.server import load_service_translator

    native = EngineConfig(engine="ctranslate2", ct2_search="native", device="cpu")
    assert load_service_translator(run, ServeConfig(engine=native)).native
    assert not load_service_translator(run, ServeConfig(engine=EngineConfig(engine="ctranslate2", device="cpu"))).native


def test_native_search_needs_the_ctranslate2_engine(run: Path) -> None:
    for command in (["translate", str(run)], ["serve", str(run), "--port", "0"]):
        refused = mtkit(*command, "--ct2-search", "native", stdin="A dog.\n")
        assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
            "error: --ct2-search native: --engine torch runs mtkit's own search; use --engine ctranslate2"
        ], refused.stderr
    from mtkit.engines.config import EngineConfig

    with pytest.raises(UserError, match="--ct2-search fast: choose one of exact, native"):
        EngineConfig(engine="ctranslate2", ct2_search="fast")
