"""mtkit/memory/matching.py: exact matches after white space is normalised, with the new sentence's protected spans
(numbers, placeholders) carried into the target; fuzzy scores as rapidfuzz's ratio floored to a percentage, at or
above the threshold only; candidates narrowed by the word index; a lookup in milliseconds over many segments."""

from __future__ import annotations

import dataclasses
import random

from rapidfuzz import fuzz

from mtkit.memory.matching import MemoryIndex, carried, normalised, spans_of

PAIRS = [
    ("A dog runs in the snow.", "Ein Hund rennt im Schnee."),
    ("Delete {count} files from 3 folders.", "{count} Dateien aus 3 Ordnern löschen."),
    ("Two men are playing football on a green field.", "Zwei Männer spielen Fußball auf einem grünen Feld."),
    ("A dog runs in the snow.", "A later duplicate: the first one stands."),
]


def test_normalised_white_space_and_spans() -> None:
    assert normalised("  A  dog\n runs.\t") == "A dog runs."
    skeleton, spans = spans_of("Delete {n} files from 12 folders.")
    assert spans == ["{n}", "12"] and "{n}" not in skeleton and "12" not in skeleton


def test_exact_match_after_white_space_with_the_first_duplicate() -> None:
    index = MemoryIndex(PAIRS)
    found = index.best(" A dog  runs in\tthe snow. ")
    assert found is not None and found.score == 100 and found.translation == "Ein Hund rennt im Schnee."
    assert index.best("a dog runs in the snow.").score < 100  # case is not white space: a fuzzy match


def test_a_stored_targets_white_space_at_an_end_the_sentence_lacks_is_not_written() -> None:
    # A catalog's msgstr "...\n" for a msgid without it: a sentence that ends at its full stop gets none, in
    # `translate`, `translate-file` and `serve` alike; one that ends in white space keeps the target as stored.
    index = MemoryIndex([("Written by %s.", "Geschrieben von %s.\n"), ("Written by %s and %s.", "\tVon %s und %s.\n")])
    assert index.best("Written by %s.").translation == "Geschrieben von %s."  # type: ignore[union-attr]
    assert index.best("Written by %s.\n").translation == "Geschrieben von %s.\n"  # type: ignore[union-attr]
    assert index.best("Written by %s and %s!", 75).translation == "Von %s und %s!"  # type: ignore[union-attr]


def test_an_exact_match_takes_the_new_sentences_placeholders_and_numbers() -> None:
    found = MemoryIndex(PAIRS).best("Delete {total} files from 12 folders.")
    assert found is not None and found.score == 100
    assert found.translation == "{total} Dateien aus 12 Ordnern löschen."
    assert found.target == "{count} Dateien aus 3 Ordnern löschen."  # what the memory holds, for the report
    assert carried("x 3 y 3", ["3", "3"], ["4", "5"]) == "x 4 y 5"


def test_fuzzy_score_is_rapidfuzz_ratio_floored_and_the_threshold_holds() -> None:
    index = MemoryIndex(PAIRS)
    query = "Two men are playing soccer on a green field."
    found = index.best(query, 75)
    expected = int(fuzz.ratio(query, PAIRS[2][0]))
    assert found is not None and found.score == expected and 75 <= expected < 100
    assert found.target == PAIRS[2][1] and found.translation == ""
    # What differs, to patch (mtkit.memory.patching): the word alone, then with a word either side.
    assert found.differences == ((("football", "soccer"), ("playing football on", "playing soccer on")),)
    assert index.best(query, expected + 1) is None
    assert index.fuzzy_match(query, 75) == dataclasses.replace(found, differences=None, written="")
    assert index.fuzzy_match(PAIRS[0][0], 50) is None  # 100 left aside
    assert index.best("Something else entirely, unrelated.", 50) is None


def test_candidates_find_the_best_among_many() -> None:
    """50,000 segments of a small vocabulary, so that every word is in hundreds of sources: a near match is still
    among the candidates and found. (How fast a lookup is: benchmarks/scenarios/memories.py.)"""
    rng = random.Random(7)
    words = [f"w{i}" for i in range(3000)]
    pairs = [(" ".join(rng.choices(words, k=10)) + ".", f"t{i}") for i in range(50_000)]
    index = MemoryIndex(pairs)
    for i in range(0, 50_000, 2_500):
        source = pairs[i][0].split()
        query = " ".join(source[:-2] + ["w1", source[-1]])  # one word changed
        found = index.best(query, 75)
        assert found is not None and found.target == f"t{i}", (query, found)


def test_sources_sharing_several_words_count_once_each() -> None:
    """250 sources holding the query's two words: 500 postings, 250 candidates, each scored once."""
    index = MemoryIndex([(f"red dog number{i}", f"t{i}") for i in range(250)])
    assert len(index.candidates("red dog", 0)) == 250
    assert index.best("red dog number7", 75).target == "t7"
