"""mtkit.bulk.document_translation.fuzzy_units: a catalog's whole strings as a memory's fuzzy matches give them for
review, the model (a stand-in here) asked once for every string's differing words: a match patched where the
translation of its differing words stands in its target, repaired where only placeables differ, else offered (the
format writes an offered target only where it holds the string's own placeholders); an exact match is left to the
memory's answer path."""

from __future__ import annotations

from typing import Any

from mtkit.bulk.document_translation import fuzzy_units
from mtkit.memory.matching import MemoryIndex

MEMORY = MemoryIndex(
    [
        ("Insert file before the archive.", "Datei vor dem Archiv einfügen."),
        ("Unknown option -x given.", "Unbekannte Option -x angegeben."),
        ("Remove the old backup copy.", "Die alte Sicherungskopie entfernen."),
        ("Files %s and %s differ", "Dateien %s und %s sind verschieden."),
    ]
)


class Words:
    """A stand-in model's n best: a few words it knows (its second best for "before"), the rest upper-cased;
    counts its calls."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[list[str]]:
        self.calls.append(list(texts))
        known = {"before": ["bevor", "vor"], "after": ["nach"]}
        return [known.get(text, [text.upper()]) for text in texts]


def test_patched_repaired_offered_and_left() -> None:
    model = Words()
    review = fuzzy_units(model, MEMORY, 75)
    units = [
        "Insert file after the archive.",
        "Unknown option -q given.",
        "Remove the old backup copies.",
        "Insert file before the archive.",
        "Files %s, %s and %s differ",
    ]
    patched, offered = review(units)
    assert patched == {units[0]: "Datei nach dem Archiv einfügen.", units[1]: "Unbekannte Option -q angegeben."}
    assert offered == {
        units[2]: "Die alte Sicherungskopie entfernen.",
        units[4]: "Dateien %s und %s sind verschieden.",  # two placeholders against three: the catalog refuses it
    }
    assert len(model.calls) == 1  # every unit's differing words in one call
    assert units[3] not in patched and units[3] not in offered  # an exact match: the memory's answer path


def test_a_masked_sentence_scores_and_carries_as_the_string_it_was_masked_from() -> None:
    """A catalog's placeholders reach the memory as stand-ins ("1", "2"): the fuzzy score counts each span as one
    mark on both sides, and the match's target is written with the sentence's own stand-ins."""
    masked: Any = MEMORY.best("Binary files 1 and 2 differ", 75)
    written: Any = MEMORY.best("Binary files %s and %s differ", 75)
    assert masked is not None and written is not None and masked.score == written.score
    assert masked.written == "Dateien 1 und 2 sind verschieden."
    assert MEMORY.best("Files %lu and %lu differ", 75).translation == "Dateien %lu und %lu sind verschieden."  # type: ignore[union-attr]


def test_a_match_whose_spans_the_sentence_cannot_give_is_never_filled_and_patched_only_to_its_spans() -> None:
    """Three placeholders against the match's two: its target would write the memory's own, so a sentence keeps the
    model's output even where entries are filled for review, unless the model's translations of what differs patch
    the target to the sentence's three."""
    match: Any = MEMORY.best("Files %s, %s and %s differ", 75)
    assert match is not None and match.spans == ("%s", "%s", "%s")
    assert match.answer("DATEIEN", {}, fill=True) == "DATEIEN"
    said = {"Files %s": ["Dateien %s"], "Files %s, %s": ["Dateien %s, %s"]}
    assert match.patched(said) == "Dateien %s, %s und %s sind verschieden."
    assert match.patched({"Files %s": ["Dateien %s"], "Files %s, %s": ["Dateien %s"]}) is None
