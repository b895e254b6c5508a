"""The terms benchmark's own logic, without a model or an aligner: reference terms taken from given alignments
(one-to-one, content words, seen twice, at most 2 a sentence), random terms the reference does not hold, and exact
whole-word term accuracy; the forced-terms measures (the target appended, the own word replaced, invented digits,
the reference with the target swapped in) and the scenario's run with a stand-in engine."""

from __future__ import annotations

import importlib
from collections import Counter
from pathlib import Path
from types import ModuleType, SimpleNamespace

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


def test_appended_finds_a_target_tacked_on_as_a_sentence_of_its_own(scenario: ModuleType) -> None:
    source = "A dog runs through the grass."
    assert scenario.appended("Ein Hund rennt durch das Rasen. Köter.", "Köter", source)
    assert scenario.appended("Ein Hund rennt durch das Rasen! köter", "Köter", source)  # any case, no stop after
    assert not scenario.appended("Ein Köter rennt durch das Gras.", "Köter", source)
    assert not scenario.appended("Ein Köter rennt. Köter.", "Köter", source)  # its first occurrence is in place
    assert not scenario.appended("Ein Hund wiegt 3.5 Köter.", "Köter", source)  # a decimal point is no break
    assert not scenario.appended("Ein Hund rennt.", "Köter", source)  # no target: not appended
    # a source of two sentences may have its term in the second
    assert not scenario.appended("Ein Hund rennt. Der Köter bellt.", "Köter", "A man runs. The dog barks.")
    assert scenario.appended("Ein Hund rennt. Er bellt. Köter.", "Köter", "A man runs. The dog barks.")


def test_replaced_needs_the_target_in_and_the_own_word_out(scenario: ModuleType) -> None:
    assert scenario.replaced("Ein Köter rennt.", "Hund", "Köter")
    assert not scenario.replaced("Ein Hund rennt. Köter.", "Hund", "Köter")  # beside it, not in its place
    assert not scenario.replaced("Ein HUND, ein Köter.", "Hund", "Köter")  # any case
    assert not scenario.replaced("Ein Tier rennt.", "Hund", "Köter")  # the own word gone, no target either
    assert scenario.replaced("Ein Hundekorb, ein Köter.", "Hund", "Köter")  # "Hundekorb" is not the word
    assert scenario.word_count("Köter, köter und Köterei", "Köter") == 2


def test_invented_digits_are_runs_the_source_lacks(scenario: ModuleType) -> None:
    assert scenario.invented_digits("A dog runs.", "Zwei 3 3 3 Hunde.")
    assert not scenario.invented_digits("2 dogs run 100 m.", "2 Hunde rennen 100 m.")
    assert scenario.invented_digits("2 dogs run 100 m.", "2 Hunde rennen 10 m.")  # a part is another run
    assert not scenario.invented_digits("A dog runs.", "Ein Hund rennt.")


def test_swapped_reference_replaces_the_first_whole_word(scenario: ModuleType) -> None:
    swap = scenario.swapped_reference
    assert swap("Ein Hund und ein Hundekorb.", "Hund", "Köter") == "Ein Köter und ein Hundekorb."
    assert swap("Ein Hund jagt einen Hund.", "Hund", "Köter") == "Ein Köter jagt einen Hund."  # the first only
    assert swap("Braune Hunde spielen.", "braune", "rote") == "Rote Hunde spielen."  # a capital at the start
    assert swap("Zwei braune Hunde.", "braune", "rote") == "Zwei rote Hunde."
    assert swap("Ein Hundekorb.", "Hund", "Köter") == "Ein Hundekorb."  # no whole word: unchanged


def test_forced_row_counts_each_measure(scenario: ModuleType) -> None:
    sources = ["A dog runs through the grass.", "A cat sleeps on the sofa.", "A man reads."]
    refs = ["Ein Hund rennt durch das Gras.", "Eine Katze schläft auf dem Sofa.", "Ein Mann liest."]
    plain = ["Ein Hund rennt durch das Gras.", "Eine Katze schläft auf dem Sofa.", "Ein Typ liest."]
    owns, targets = ["Hund", "Katze", "Mann"], ["Köter", "Mieze", "Herr"]
    forced = ["Ein Köter rennt durch das Gras.", "Eine Katze schläft auf dem Sofa. Mieze 7.", "Ein Herr Herr liest."]
    row = scenario.forced_row("glossary", forced, sources, plain, refs, owns, targets)
    assert (row["target once"], row["own word held"], row["own word replaced"]) == (2, 2, 1)
    assert (row["appended"], row["invented digits"], row["sentences"]) == (1, 1, 3)
    # the plain outputs against the references as they are: the first two are the references
    base = scenario.forced_row("no glossary", plain, sources, plain, refs, owns, targets)
    assert (base["target once"], base["own word replaced"], base["invented digits"]) == (0, 0, 0)
    assert base["chrF, refs"] > base["chrF, swapped refs"] and row["chrF, swapped refs"] > row["chrF, refs"]
    perfect = [scenario.swapped_reference(r, o, t) for r, o, t in zip(refs, owns, targets)]
    assert scenario.forced_row("swapped", perfect, sources, plain, refs, owns, targets)["chrF, swapped refs"] == 100.0


def test_own_words_are_the_aligned_words_of_the_random_terms_sources(scenario: ModuleType) -> None:
    Term = scenario.Term
    terms = [Term(0, "dog", "Hund"), Term(0, "grass", "Gras"), Term(1, "cat", "Katze")]
    randoms = [Term(0, "dog", "Sofa"), Term(1, "cat", "Gras")]
    assert scenario.own_words(terms, randoms) == ["Hund", "Katze"]


def test_run_reports_a_target_tacked_on_beside_one_in_place(
    scenario: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The scenario end to end with a stand-in engine that writes the target in the own word's place by every method
    but guided, which tacks it on as a sentence of its own: term accuracy is 1 for both, the forced table tells
    them apart."""
    src = ["A dog runs through the grass.", "A cat sleeps on the sofa.", "A man reads a book."]
    refs = ["Ein Hund rennt durch das Gras.", "Eine Katze schläft auf dem Sofa.", "Ein Mann liest ein Buch."]
    terms = [scenario.Term(k, s.split()[1], r.split()[1]) for k, (s, r) in enumerate(zip(src, refs))]

    class Engine:
        options = SimpleNamespace(term_method="guided")

        def __init__(self, run: Path, engine: str) -> None:
            pass

        def translate(self, lines: list[str], glossaries: dict | None = None, method: str = "") -> tuple:
            outputs = [refs[src.index(x)] for x in lines]
            for k, glossary in (glossaries or {}).items():
                for target in glossary.values():
                    own = outputs[k].split()[1]
                    outputs[k] = f"{outputs[k]} {target}." if method == "guided" else outputs[k].replace(own, target)
            return outputs, [[] for _ in lines], Counter(), 1.0, 0.5

    monkeypatch.setattr(scenario, "read_lines", lambda lang, count: (src if lang == "en" else refs)[:count])
    monkeypatch.setattr(scenario, "build_terms", lambda s, r, pairs: (terms, Counter({("dog", "Hund"): 2})))
    monkeypatch.setattr(scenario, "Terms", Engine)
    written: dict = {}
    monkeypatch.setattr(
        scenario, "write_results", lambda name, report, rows: written.update(report, rows=rows) or tmp_path / "r.json"
    )
    (tmp_path / "r.md").write_text("")
    scenario.run(SimpleNamespace(demo_run=str(tmp_path), lines=3, small=True, rounds=1, engine="torch"))
    forced = {row["terms"]: row for row in written["forced"]}
    inline, guided = forced["random, glossary, inline"], forced["random, glossary, guided"]
    plain = forced["random, no glossary"]
    accuracy = {row["terms"]: row["accuracy"] for row in written["rows"]}
    assert accuracy["random, glossary, inline"] == accuracy["random, glossary, guided"] == 1.0
    assert (inline["own word replaced"], inline["appended"], inline["chrF, swapped refs"]) == (3, 0, 100.0)
    assert (guided["own word replaced"], guided["appended"], guided["target once"]) == (0, 3, 3)
    assert guided["chrF, swapped refs"] < plain["chrF, refs"] - 1.0
    assert "## Forced terms" in (tmp_path / "r.md").read_text()
