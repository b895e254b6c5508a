"""mtkit.text.casing: which sentences are in capitals or Title Case, their sentence case, and the case given back."""

from __future__ import annotations

import pytest

from mtkit.text.casing import TITLE, UPPER, case_of, normalised, restored


@pytest.mark.parametrize(
    ("sentence", "case"),
    [
        ("A MAN IN A RED SHIRT.", UPPER),
        ("ZWEI HUNDE SPIELEN IM SCHNEE.", UPPER),
        ("Two Dogs Play In The Snow.", TITLE),
        ("A man in a red shirt.", ""),
        ("NASA sent a probe to Mars.", ""),
        ("OK.", ""),  # too short to tell an acronym from a shout
        ("USA", ""),
        ("I Met John.", ""),  # three words: too few to call it Title Case
    ],
)
def test_case_of(sentence: str, case: str) -> None:
    assert case_of(sentence) == case


def test_normalised_and_restored() -> None:
    assert normalised("A MAN IN A RED SHIRT.", UPPER) == "A man in a red shirt."
    assert normalised("\u201eZWEI HUNDE.\u201c", UPPER) == "\u201eZwei hunde.\u201c"
    assert normalised("Two Dogs Play In The Snow.", TITLE) == "Two dogs play in the snow."
    assert restored("Ein Mann im roten Hemd.", UPPER) == "EIN MANN IM ROTEN HEMD."
    assert restored("Eine große Straße.", UPPER) == "EINE GROẞE STRAẞE." and "STRAẞE".lower() == "straße"
    assert restored("zwei Hunde spielen im Schnee.", TITLE) == "Zwei Hunde Spielen Im Schnee."
    assert normalised("As is.", "") == restored("As is.", "") == "As is."
