"""mtkit.memory.fragments and the index's fragments: a memory's entry cut into the pieces a catalog's string is sent
as (sentences, a help line's description apart from its option column, a table's cells), each matched as a segment
of its own and reported as the entry it came from; an entry that is one piece, or whose sides cut differently, gives
none; an index saved with its fragments opens with them."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtkit.memory.fragments import fragments_of
from mtkit.memory.index_files import open_index, save_index
from mtkit.memory.matching import MemoryIndex

pytest.importorskip("rapidfuzz")

HELP = (
    "  -n, --mindays MIN_DAYS        set minimum number of days before password\n"
    "                                change to MIN_DAYS\n",
    "  -n, --mindays MIN_TAGE        Minimale Anzahl der Tage vor\n"
    "                                Passwortänderung auf MIN_TAGE setzen\n",
)
TWO = ("Cannot open the file. Check its permissions.", "Die Datei kann nicht geöffnet werden. Prüfen Sie ihre Rechte.")
PAIRS = [HELP, TWO, ("A dog runs in the snow.", "Ein Hund rennt im Schnee.")]
LANGUAGES = ("en", "de")


def test_an_entry_cuts_into_the_pieces_a_catalog_sends() -> None:
    assert fragments_of(*HELP, LANGUAGES) == [
        (
            "set minimum number of days before password change to MIN_DAYS",
            "Minimale Anzahl der Tage vor Passwortänderung auf MIN_TAGE setzen",
        )
    ]
    assert fragments_of(*TWO, LANGUAGES) == [
        ("Cannot open the file.", "Die Datei kann nicht geöffnet werden."),
        ("Check its permissions.", "Prüfen Sie ihre Rechte."),
    ]
    assert fragments_of("A dog runs in the snow.", "Ein Hund rennt im Schnee.", LANGUAGES) == []  # one piece
    assert fragments_of("One. Two.", "Eins, zwei.", LANGUAGES) == []  # the sides cut differently


def test_a_sentence_of_a_longer_entry_finds_its_fragment_reported_as_the_entry() -> None:
    memory = MemoryIndex(PAIRS, languages=lambda: LANGUAGES)
    assert len(memory) == len(PAIRS)  # segments: the fragments are the index's, not the memory's
    match = memory.best("Check its permissions.", 75)
    assert match is not None and match.score == 100 and match.translation == "Prüfen Sie ihre Rechte."
    assert match.segment == 1
    description = memory.best("set minimum number of days before password change to MIN_DAYS", 75)
    assert description is not None and description.score == 100 and description.segment == 0
    assert MemoryIndex(PAIRS).best("Check its permissions.", 100) is None  # built without languages: none


def test_an_index_saved_with_its_fragments_opens_with_them(tmp_path: Path) -> None:
    built = MemoryIndex(PAIRS, "m", languages=lambda: LANGUAGES)
    assert save_index(built, tmp_path / "m")
    opened = open_index(tmp_path / "m", "m", len(PAIRS))
    assert opened is not None and len(opened) == len(PAIRS)
    for sentence in ("Check its permissions.", "Cannot open the file.", "A dog runs in the snow."):
        assert opened.best(sentence, 75) == built.best(sentence, 75)
