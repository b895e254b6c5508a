"""The terms benchmark's own logic, without a model or an aligner: reference terms taken from given alignments
(one-to-one, content words, seen twice, at most 2 a sentence), random terms the reference does not hold, and exact
whole-word term accuracy."""

from __future__ import annotations

import importlib
from collections import Counter
from types import ModuleType

import pytest

from tests.conftest import ROOT

BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture
def scenario(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # benchmarks/run.py puts benchmarks/ first on the path: the scenarios import harness as top level
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("scenarios.terms")


def test_words_keep_hyphens_and_split_punctuation(scenario: ModuleType) -> None:
    assert scenario.words("A T-shirt, red.") == ["A", "T-shirt", ",", "red", "."]


def test_reference_terms_from_alignments(scenario: ModuleType) -> None:
    src = [scenario.words("A brown dog jumps over the fence ."), scenario.words("Two dogs and a ball .")]
    ref = [scenario.words("Ein brauner Hund springt über den Zaun ."), scenario.words("Zwei Hunde und ein Ball .")]
    links = [
        [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (7, 7)],
        [(0, 0), (1, 1), (2, 2), (3, 3), (4, 3), (5, 4)],  # "a ball" -> "ein": one-to-many, so "ball" is no term
    ]
    counts = Counter({("brown", "brauner"): 2, ("dog", "Hund"): 5, ("jumps", "springt"): 1, ("fence", "Zaun"): 3})
    counts[("dogs", "Hunde")] = 2
    terms = scenario.reference_terms(src, ref, links, counts)
    # "dog" has 3 letters, "jumps" was seen once, "over"/"über" are stop words; at most 2 a sentence, in source order
    assert [(t.line, t.source, t.target) for t in terms] == [
        (0, "brown", "brauner"),
        (0, "fence", "Zaun"),
        (1, "dogs", "Hunde"),
    ]
    assert len(scenario.reference_terms(src, ref, links, counts, min_count=1)) == 3  # "jumps" counted, third: cut


def test_random_terms_are_nouns_the_reference_lacks(scenario: ModuleType) -> None:
    Term = scenario.Term
    terms = [Term(0, "dog", "Hund"), Term(1, "cat", "Katze"), Term(2, "ball", "Ball"), Term(2, "red", "rot")]
    refs = ["Ein Hund.", "Eine Katze und ein Ball.", "Ein roter Ball."]
    chosen = scenario.random_terms(terms, refs, 10)
    assert [t.line for t in chosen] == [0, 1, 2]
    for term in chosen:
        assert term.source == next(t.source for t in terms if t.line == term.line)  # the sentence's first term
        assert term.target[:1].isupper() and not scenario.has_word(refs[term.line], term.target, case=False)
    assert chosen == scenario.random_terms(terms, refs, 10)  # seeded


def test_accuracy_counts_whole_words(scenario: ModuleType) -> None:
    Term = scenario.Term
    terms = [Term(0, "dog", "Hund"), Term(1, "dog", "Hund"), Term(2, "dog", "Hund"), Term(3, "dog", "Hund")]
    outputs = ["Ein Hund.", "Ein Hundehalter.", "Ein HUND rennt.", "Ein hund, ein Hund"]
    assert scenario.accuracy(terms, outputs) == 0.5  # "Hundehalter" is not the word, "HUND" not its case
    assert scenario.accuracy(terms, outputs, case=False) == 0.75
    assert scenario.accuracy([], []) == 0.0


def test_frequent_pairs_take_each_source_once(scenario: ModuleType) -> None:
    counts = Counter({("shirt", "Hemd"): 5, ("shirt", "T-Shirt"): 3, ("dog", "Hund"): 4, ("ball", "Ball"): 1})
    assert scenario.frequent_pairs(counts, 2) == {"shirt": "Hemd", "dog": "Hund"}


def test_sampled_pairs_draw_seeded_entries_of_words_aligned_twice(scenario: ModuleType) -> None:
    counts = Counter({("shirt", "Hemd"): 5, ("shirt", "T-Shirt"): 3, ("dog", "Hund"): 4, ("cat", "Katze"): 2})
    counts[("ball", "Ball")] = 1  # aligned once: the aligner's error as often as not, never drawn
    drawn = scenario.sampled_pairs(counts, 2)
    assert len(drawn) == 2 and set(drawn) <= {"shirt", "dog", "cat"} and drawn.get("shirt", "Hemd") == "Hemd"
    assert scenario.sampled_pairs(counts, 2) == drawn  # the same draw every run
    assert scenario.sampled_pairs(counts, 10) == {"cat": "Katze", "dog": "Hund", "shirt": "Hemd"}


def test_frequent_pairs_absent_from_lines_leave_out_their_words(scenario: ModuleType) -> None:
    counts = Counter({("shirt", "Hemd"): 5, ("dog", "Hund"): 4, ("ball", "Ball"): 1, ("cat", "Katze"): 1})
    lines = ["A man in a SHIRT.", "The ball-game."]  # a glossary finds "ball" in "ball-game"
    assert scenario.frequent_pairs(counts, 2, lines) == {"dog": "Hund", "cat": "Katze"}


def test_method_counts_name_every_way_a_hinted_model_takes(scenario: ModuleType) -> None:
    used = Counter({"model": 3, "hint": 5, "placeholder": 2})
    assert scenario.method_counts(used) == "model 3, hint 5, placeholder 2"
