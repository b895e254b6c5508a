"""mtkit.memory.patching: a fuzzy match's target patched by the model's translations of the parts its sentence
differs in (given here as a dict), or left unpatched where the target does not hold them once; and the answer of an
unpatched match, the model's output unless entries are filled for review."""

from __future__ import annotations

import pytest

from mtkit.memory.matching import MemoryIndex
from mtkit.memory.patching import answer, asked, differences, patched

TARGET = "Füge Datei vor [MEMBER] ein."


def test_the_differing_word_alone_then_with_a_word_either_side() -> None:
    found = differences("Insert file after [MEMBER].", "Insert file before [MEMBER].")
    assert found == ((("before", "after"), ("file before [", "file after [")),)
    assert asked(found) == ["before", "Before", "after", "file before [", "File before [", "file after ["]
    assert differences("Insert file.", "Insert file.") == ()
    assert differences("Insert file now", "Insert file") is None  # added at the end: nothing on its right to hold


def test_a_translation_found_once_is_swapped_and_the_targets_capital_kept() -> None:
    found = differences("Insert file after [MEMBER].", "Insert file before [MEMBER].")
    assert patched(TARGET, found, {"before": ["vor"], "after": ["nach"]}) == "Füge Datei nach [MEMBER] ein."
    # Any of the n best translations of the match's side; the sentence's side takes its best.
    nbest = {"before": ["bevor", "vor"], "after": ["nach", "hinter"]}
    assert patched(TARGET, found, nbest) == "Füge Datei nach [MEMBER] ein."
    # The lower-case form is asked too; the word takes the target's capital where it begins it.
    signal = differences("unknown version", "unknown signal")
    assert patched(
        "Unbekanntes Signal", signal, {"signal": ["signal"], "Signal": ["Signal"], "version": ["version"]}
    ) == ("Unbekanntes Version")


def test_no_patch_where_the_target_lacks_the_translation_or_holds_it_twice() -> None:
    found = differences("Insert file after [MEMBER].", "Insert file before [MEMBER].")
    assert patched(TARGET, found, {"before": ["bevor"], "after": ["nach"]}) is None
    assert patched("vor vor [MEMBER]", found, {"before": ["vor"], "after": ["nach"]}) is None
    assert patched(TARGET, found, {"before": ["vor"]}) is None  # the sentence's side untranslated


def test_an_unpatched_match_answers_with_the_output_or_for_review_the_target() -> None:
    target = "Ein Hund rennt im Schnee."
    assert answer("Zwei Katzen schlafen.", target, fill=False) == "Zwei Katzen schlafen."
    assert answer("Zwei Katzen schlafen.", target, fill=True) == target
    assert answer("Ein Hund rennt im Schnee!", target, fill=True) == "Ein Hund rennt im Schnee!"  # a light edit


def test_a_match_with_other_placeholders_is_patched_to_the_sentences_or_not_used() -> None:
    pytest.importorskip("rapidfuzz")
    # "and %s" taken out: its translation with a word either side is found in the target and swapped for the
    # sentence's own there; the patch must give the sentence's placeholders, and the target, holding the match's,
    # is never offered in its place.
    match = MemoryIndex([("Written by %s and %s.", "Implementiert von %s und %s.")]).best("Written by %s.", 75)
    assert match is not None and match.spans == ("%s",) and match.asks() == ["%s and %s.", "%s."]
    assert match.patched({"%s and %s.": ["%s und %s."], "%s.": ["%s."]}) == "Implementiert von %s."
    assert match.patched({"%s and %s.": ["%s und %s."], "%s.": ["%s, %s."]}) is None  # a placeholder too many
    assert match.answer("Geschrieben von %s.", {}, fill=True) == "Geschrieben von %s."
