"""mtkit/memory/readers.py: PO (translated, not fuzzy), XLIFF 1.2 and 2.x units with targets and TSV read as pairs
with their languages; a format it does not take, or a bad line, a one-line UserError naming the file."""

from __future__ import annotations

import io

import pytest

from mtkit.errors import UserError
from mtkit.memory.readers import pair_reader

PO = b"""msgid ""
msgstr ""
"Language: de\\n"
"Content-Type: text/plain; charset=UTF-8\\n"

msgid "Save"
msgstr "Speichern"

#, fuzzy
msgid "Open"
msgstr "Offnen?"

msgid "Close"
msgstr ""
"""
XLIFF_1 = b"""<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="en"
 target-language="de-DE" datatype="plaintext" original="x"><body>
<trans-unit id="1"><source>Save <g id="1">now</g></source><target>Jetzt <g id="1">speichern</g></target></trans-unit>
<trans-unit id="2"><source>Untranslated</source></trans-unit></body></file></xliff>"""
XLIFF_2 = b"""<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en" trgLang="fr">
<file id="f"><unit id="u"><segment><source>A dog.</source><target>Un chien.</target></segment></unit></file></xliff>"""


def pairs(data: bytes, name: str, source: str = "", target: str = "") -> tuple[list, object]:
    reader = pair_reader(io.BytesIO(data), name, source, target)
    return list(reader), reader


def test_po_takes_translated_entries_that_are_not_fuzzy() -> None:
    found, reader = pairs(PO, "ui.po")
    assert found == [("Save", "Speichern")] and (reader.source_lang, reader.target_lang) == ("en", "de")
    assert reader.skipped == 2


def test_xliff_1_and_2_units_with_targets() -> None:
    found, reader = pairs(XLIFF_1, "a.xlf")
    assert found == [("Save now", "Jetzt speichern")] and (reader.target_lang, reader.skipped) == ("de", 1)
    found, reader = pairs(XLIFF_2, "b.xliff")
    assert found == [("A dog.", "Un chien.")] and (reader.source_lang, reader.target_lang) == ("en", "fr")


def test_tsv_needs_its_languages_and_names_a_bad_line() -> None:
    found, _ = pairs(b"A dog.\tEin Hund.\n\nA cat.\tEine Katze.\n", "m.tsv", "en", "de")
    assert found == [("A dog.", "Ein Hund."), ("A cat.", "Eine Katze.")]
    with pytest.raises(UserError, match="no languages"):
        pairs(b"a\tb\n", "m.tsv")
    with pytest.raises(UserError, match=r"m.tsv:2: expected source<TAB>target"):
        pairs(b"a\tb\nno tab here\n", "m.tsv", "en", "de")


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(UserError, match=r"m.docx: a memory is imported from"):
        pairs(b"", "m.docx")
