"""The guided search on a real model (tests/data/run-0681275, a small model that translates badly): glossary targets
given to mtkit's search come out in its translations, n-best included, a line without terms translates as it did
without, and `mtkit translate --glossary` by default reports the guided way; CTranslate2, whose search cannot place
terms, takes the glossary by check-first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mtkit.engines.config import EngineConfig
from mtkit.engines.factory import load_translator
from mtkit.engines.options import TranslateOptions
from mtkit.engines.output import decode
from mtkit.engines.plans import split_options
from mtkit.search.config import SearchOverrides
from mtkit.text.glossary import term_ways
from tests.conftest import read_gz_lines, run_mtkit_in_process
from tests.engines.test_protected_lines import old_run  # noqa: F401  (the fixture)

TARGETS = ("Hund", "Straße", "Mann")


def test_the_search_places_the_targets_it_is_given(old_run: Path, multi30k: Path) -> None:  # noqa: F811
    translator = load_translator(old_run, search=SearchOverrides(nbest=4))
    lines = read_gz_lines(multi30k / "test_2016_flickr.en.gz", 60)
    terms = [(TARGETS[n % 3],) if n % 4 else () for n in range(len(lines))]  # every fourth line without
    plain = translator.translate_hypotheses(lines)
    guided = translator.translate_hypotheses(lines, terms=terms)
    held = 0
    for n, (line_terms, hyps) in enumerate(zip(terms, guided)):
        texts = decode(translator.tokenizer, [h.tokens for h in hyps])
        if not line_terms:  # the same search as without a glossary, in a batch of guided lines
            assert [(h.tokens, h.logprob) for h in hyps] == [(h.tokens, h.logprob) for h in plain[n]]
            continue
        held += all(re.search(rf"(?<!\w){line_terms[0]}(?!\w)", text) for text in texts)
    assert held >= 0.9 * sum(map(bool, terms)), held
    plain_texts = decode(translator.tokenizer, [h[0].tokens for h in plain])
    assert sum(any(t in text for t in TARGETS) for text in plain_texts)
    by_itself = sum(
        bool(re.search(rf"(?<!\w){line_terms[0]}(?!\w)", text))
        for line_terms, text in zip(terms, plain_texts)
        if line_terms
    )
    assert by_itself < held / 2, (by_itself, held)  # the model writes most of them only when guided
    assert sum(map(bool, terms)) == 45


def test_mtkit_translate_takes_a_glossary_by_the_guided_search_when_asked(old_run: Path, tmp_path: Path) -> None:  # noqa: F811
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("dog\tHund\nstreet\tStraße\n", encoding="utf-8")
    lines = "A dog runs down the street.\nA man sleeps.\n"
    guided = ("--glossary", glossary, "--no-guard", "--term-method", "guided")
    result = run_mtkit_in_process("translate", old_run, *guided, stdin=lines)
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert out[0].count("Hund") == 1 and out[0].count("Straße") == 1
    assert re.search(
        r"glossary \(guided\): 2 of 2 terms in the output; sentences by way: (guided|placeholder) 1", result.stderr
    )
    both = run_mtkit_in_process(
        "translate", old_run, "--glossary", glossary, "--no-guard", "--term-method", "check-first", stdin=lines
    )
    assert "glossary (check-first): 2 of 2 terms" in both.stderr


def test_ctranslate2_does_not_guide_and_both_engines_replace_by_default(old_run: Path) -> None:  # noqa: F811
    translator = load_translator(old_run, EngineConfig(engine="ctranslate2"))
    assert not translator.guides_terms and split_options(translator).term_method == "replace"
    assert load_translator(old_run).guides_terms and split_options(load_translator(old_run)).term_method == "replace"
    guided = split_options(translator, options=TranslateOptions(term_method="guided"))
    assert term_ways(guided.term_method, hints=False, guides=False) == ("model", "placeholder")  # no search to guide


@pytest.mark.exactness
def test_a_guided_line_translates_alone_as_in_its_batch(old_run: Path, multi30k: Path) -> None:  # noqa: F811
    translator = load_translator(old_run, search=SearchOverrides(nbest=2))
    lines = read_gz_lines(multi30k / "test_2016_flickr.en.gz", 12)
    terms = [(TARGETS[n % 3], TARGETS[(n + 1) % 3]) if n % 3 else () for n in range(len(lines))]
    together = translator.translate_hypotheses(lines, terms=terms)
    for line, line_terms, hyps in zip(lines, terms, together):
        alone = translator.translate_hypotheses([line], terms=[line_terms])[0]
        assert [(h.tokens, h.logprob) for h in alone] == [(h.tokens, h.logprob) for h in hyps]
