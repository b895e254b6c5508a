"""mtkit.memory.repair: a fuzzy match whose source differs from the sentence only in placeables (identifiers, option
letters, numbers, names in capitals, names between quotes, text of no words at its ends) answers it with those
swapped in its target; any other difference leaves the match to the model."""

from __future__ import annotations

import pytest

from mtkit.memory.matching import MemoryIndex
from mtkit.memory.repair import repaired

pytest.importorskip("rapidfuzz")


@pytest.mark.parametrize(
    ("sentence", "source", "target", "expected"),
    [
        (
            "internal error: bpf_cgen_rebuild_tables: conflicting values",
            "internal error: fr30_cgen_rebuild_tables: conflicting values",
            "interner Fehler: fr30_cgen_rebuild_tables: widersprüchliche Werte",
            "interner Fehler: bpf_cgen_rebuild_tables: widersprüchliche Werte",
        ),
        (
            "%s: the -c, -e, and -m flags are exclusive",
            "%s: the -L, -p, and -U flags are exclusive",
            "%s: -L, -p und -U können nur exklusiv genutzt werden.",
            "%s: -c, -e und -m können nur exklusiv genutzt werden.",
        ),
        (
            "INET6 (IPv6) not configured",
            "AX25 (IPv6) not configured",
            "AX25 (IPv6) nicht konfiguriert",
            "INET6 (IPv6) nicht konfiguriert",
        ),
        ("Is a directory", "%s: Is a directory", "%s: Ist ein Verzeichnis", "Ist ein Verzeichnis"),
        # Text of no words added before the message, or after it, or taken out where the target holds it once.
        ("%s: syntax error", "syntax error", "Syntaxfehler", "%s: Syntaxfehler"),
        ("%s%sUnknown signal %d\n", "Unknown signal %d", "Unbekanntes Signal %d\n", "%s%sUnbekanntes Signal %d\n"),
        ("%s\t\t\tASCII: ", "ASCII:", "\t\t\tASCII: ", "%s\t\t\tASCII: "),
        ("<unknown>: %d", "<unknown>", "<Unbekannt>", "<Unbekannt>: %d"),
        (
            "%s: Leaving directory '%s'",
            "%s[%u]: Leaving directory '%s'",
            "%s[%u]: Verzeichnis „%s“ wird verlassen",
            "%s: Verzeichnis „%s“ wird verlassen",
        ),
        (
            "%s: cannot allocate %lu bytes",
            "%s: %s:%d: cannot allocate %lu bytes",
            "%s: %s:%d: Konnte keine %lu Bytes reservieren.",
            "%s: Konnte keine %lu Bytes reservieren.",
        ),
        (  # added in the middle beside the placeholder and colon the target holds together once
            "%s[%u]: Leaving directory '%s'",
            "%s: Leaving directory '%s'",
            "%s: Verzeichnis „%s“ wird verlassen",
            "%s[%u]: Verzeichnis „%s“ wird verlassen",
        ),
        (  # taken from the end, where the target ends with it (it stands twice)
            "setlocale: %s: cannot change locale (%s)",
            "setlocale: %s: cannot change locale (%s): %s",
            "setlocale: %s: Kann die Regionseinstellungen nicht ändern (%s): %s",
            "setlocale: %s: Kann die Regionseinstellungen nicht ändern (%s)",
        ),
        # A name between quotes is copied as written; a capital at the start is the same word.
        (
            "extraneous text after 'endef' directive",
            "extraneous text after 'define' directive",
            "Überflüssiger Text nach einer „define“-Anweisung",
            "Überflüssiger Text nach einer „endef“-Anweisung",
        ),
        ("Unknown signal", "unknown signal", "Unbekanntes Signal", "Unbekanntes Signal"),
        ("-w, --days", "-W, --days", "-W, --Tage", "-w, --Tage"),  # an option letter's case is the option
        # A placeholder is one token, glibc's %Zd among them.
        ("illegal sequence at %Zd", "illegal sequence at %ld", "ungültige Sequenz an %ld", "ungültige Sequenz an %Zd"),
    ],
)
def test_placeables_are_swapped_in_the_target(sentence: str, source: str, target: str, expected: str) -> None:
    assert repaired(sentence, source, target) == expected


@pytest.mark.parametrize(
    ("sentence", "source", "target"),
    [
        ("Accessible Parent", "Accessible Name", "Barrierefreier Name"),  # a word the target may translate alike
        ("failed to open scratch file", "failed to unlink scratch file", "Löschen (unlink) der Datei fehlgeschlagen"),
        ("Binary files %s and %s differ", "Files %s and %s differ", "Dateien %s und %s sind verschieden."),  # added
        ("source register differs", "size register differs", "Größenregister unterscheidet sich"),  # translated
        ("duplicate group entry", "duplicate shadow group entry", "Doppelter Eintrag für shadow-Gruppe"),  # glued
        ("copy A1 to A1", "copy B2 to B2", "B2 nach B2 kopieren"),  # the placeable twice in the target
        ("Same text", "Same text", "Gleicher Text"),  # nothing to repair: an exact match's business
        ("Bad value: %d", "Bad value", "Falscher Wert."),  # arguments after the target's full stop
        ("Interface", "interface %s", "Schnittstelle: %s"),  # the colon would lead to nothing
        ("failed to read the file", "failed to read the map", "Lesen der Karte fehlgeschlagen"),  # a word, unquoted
        ("copy %s to here", "copy to here", "hierher kopieren"),  # added in the middle: no place for it
        ("%s: illegal option -- %c", "%s: invalid option -- '%c'", "%s: Ungültige Option -- %c"),  # a word too
    ],
)
def test_any_other_difference_is_not_repaired(sentence: str, source: str, target: str) -> None:
    assert repaired(sentence, source, target) is None


def test_the_memorys_best_match_carries_its_repair_and_keeps_its_score() -> None:
    memory = MemoryIndex(
        [
            (
                "internal error: fr30_cgen_rebuild_tables: conflicting values",
                "interner Fehler: fr30_cgen_rebuild_tables",
            ),
            ("Accessible Name", "Barrierefreier Name"),
        ]
    )
    match = memory.best("internal error: bpf_cgen_rebuild_tables: conflicting values", 75)
    assert match is not None and 75 <= match.score < 100
    assert match.translation == "interner Fehler: bpf_cgen_rebuild_tables"
    assert match.report()["target"] == "interner Fehler: fr30_cgen_rebuild_tables"
    other = memory.best("Accessible Names", 75)
    assert other is not None and other.score < 100 and other.translation == ""


def test_a_match_with_other_placeholders_is_answered_where_the_repair_gives_the_sentences() -> None:
    memory = MemoryIndex(
        [("syntax error in expression", "Syntaxfehler im Ausdruck"), ("%s: no job control", "%s: Keine Jobsteuerung")]
    )
    added = memory.best("%s: syntax error in expression", 75)
    assert added is not None and added.score < 100 and added.translation == "%s: Syntaxfehler im Ausdruck"
    taken = memory.best("no job control", 75)
    assert taken is not None and taken.score < 100 and taken.translation == "Keine Jobsteuerung"
    words = memory.best("%s: syntax errors in expression", 75)  # a word differs too: not repaired, not written
    assert words is not None and words.translation == "" and words.written == ""
