"""Translation files as corpus sources (mtkit/corpus/translation_files.py through mtkit/corpus/sources.py's
file_source) and the MO reader of mtkit/memory/readers.py: which gettext entries count, plurals, entries of several
lines, TMX and XLIFF units, a header of another language refused."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mtkit.corpus.sources import Source, file_source, source_span
from mtkit.errors import UserError
from mtkit.memory.readers import pair_reader

LANGS = ("en", "de")
PO = r"""# A catalog as translators leave it.
msgid ""
msgstr ""
"Project-Id-Version: demo 1.0\n"
"Language: de_DE\n"
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

msgid "Open file"
msgstr "Datei öffnen"

#, fuzzy
msgid "Close file"
msgstr "Datei schließen"

msgid "Not translated yet"
msgstr ""

msgctxt "menu"
msgid "Quit"
msgstr "Beenden"

#, c-format
msgid "%d file deleted"
msgid_plural "%d files deleted"
msgstr[0] "%d Datei gelöscht"
msgstr[1] "%d Dateien gelöscht"

msgid ""
"Usage: demo [OPTION]...\n"
"Show the \"demo\".\n"
msgstr ""
"Aufruf: demo [OPTION]...\n"
"Zeigt die \"Demo\".\n"

msgid "One line\nand another\nand a third"
msgstr "Eine Zeile und noch zwei"

#~ msgid "Removed long ago"
#~ msgstr "Längst entfernt"
"""
# What a Poedit or Weblate user expects of PO above: no fuzzy, untranslated, obsolete or header entry; both plural
# forms; msgctxt left out; the help text line by line; the entry of 3 source lines and 1 target line one pair.
EXPECTED = [
    ("Open file", "Datei öffnen"),
    ("Quit", "Beenden"),
    ("%d file deleted", "%d Datei gelöscht"),
    ("%d files deleted", "%d Dateien gelöscht"),
    ("Usage: demo [OPTION]...", "Aufruf: demo [OPTION]..."),
    ('Show the "demo".', 'Zeigt die "Demo".'),
    ("One line and another and a third", "Eine Zeile und noch zwei"),
]


def pairs(source: Source) -> list[tuple[str, str]]:
    return [pair for src, tgt in source.chunks() for pair in zip(src, tgt, strict=True)]


def read(prefix: Path | str, chunk_pairs: int = 2) -> Source:
    return file_source("train", str(prefix), LANGS, "error", True, chunk_pairs)


def write_mo(po: Path) -> Path:
    """PO compiled as gettext's own msgfmt does it, else by polib (both leave fuzzy entries out)."""
    mo = po.with_suffix(".mo")
    if shutil.which("msgfmt"):
        subprocess.run(["msgfmt", "-o", str(mo), str(po)], check=True)
    else:
        polib = pytest.importorskip("polib")
        polib.pofile(str(po)).save_as_mofile(str(mo))
    return mo


@pytest.fixture
def po(tmp_path: Path) -> Path:
    path = tmp_path / "demo.po"
    path.write_text(PO, encoding="utf-8")
    return path


def test_a_po_catalog_gives_its_translated_entries_line_by_line(po: Path, capsys: pytest.CaptureFixture) -> None:
    source = read(po)
    assert source.count == len(EXPECTED)
    assert pairs(source) == EXPECTED
    assert pairs(source) == EXPECTED  # re-readable, as every Source
    assert "1 entries of several lines joined into one pair each" in capsys.readouterr().err


def test_a_compiled_catalog_gives_the_same_pairs(po: Path) -> None:
    source = read(write_mo(po))
    # An MO file holds its entries sorted by their key (msgctxt, EOT, msgid): "menu\x04Quit" comes last.
    assert pairs(source) == [EXPECTED[i] for i in (2, 3, 6, 0, 4, 5, 1)]
    assert source.count == len(EXPECTED)


def test_a_folder_or_glob_of_catalogs_is_every_file_in_sorted_order(po: Path, tmp_path: Path) -> None:
    second = tmp_path / "zz.po"
    second.write_text(PO.replace("Open file", "Save file").replace("Datei öffnen", "Datei speichern"), "utf-8")
    for prefix in (tmp_path, tmp_path / "*.po"):
        got = pairs(read(prefix))
        assert got[: len(EXPECTED)] == EXPECTED and got[len(EXPECTED)] == ("Save file", "Datei speichern")


def test_a_span_of_translation_files_is_its_pairs(po: Path) -> None:
    assert pairs(source_span(read(po), 2, 5)) == EXPECTED[2:5]


def test_a_header_of_another_language_is_refused_naming_the_file(po: Path) -> None:
    po.write_text(PO.replace("Language: de_DE", "Language: fr"), encoding="utf-8")
    with pytest.raises(UserError, match=r"demo\.po: its header names the language 'fr', but the corpus's is 'de'"):
        read(po)
    with pytest.raises(UserError, match=r"demo\.mo: its header names the language 'fr'"):
        read(write_mo(po))


def test_a_language_named_in_words_is_let_through(po: Path) -> None:
    po.write_text(PO.replace("Language: de_DE", "Language: German"), encoding="utf-8")
    assert read(po).count == len(EXPECTED)


def test_a_broken_po_line_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.po"
    path.write_text('msgid "a"\nmsgstr "b"\nnonsense here\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"broken\.po:3: not a PO line"):
        read(path)


TMX = """<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4"><header srclang="en" datatype="plaintext" segtype="sentence" adminlang="en"
 o-tmf="x" creationtool="x" creationtoolversion="1"/><body>
<tu><tuv xml:lang="en-US"><seg>Print <bpt i="1">&lt;b&gt;</bpt>now<ept i="1">&lt;/b&gt;</ept></seg></tuv>
<tuv xml:lang="de-DE"><seg>Jetzt <bpt i="1">&lt;b&gt;</bpt>drucken<ept i="1">&lt;/b&gt;</ept></seg></tuv></tu>
<tu><tuv xml:lang="en"><seg>Only English</seg></tuv><tuv xml:lang="fr"><seg>Seulement</seg></tuv></tu>
<tu><tuv xml:lang="de"><seg>Zeile eins
Zeile zwei</seg></tuv><tuv xml:lang="en"><seg>Line one
Line two</seg></tuv></tu>
</body></tmx>
"""
XLIFF_12 = """<?xml version="1.0"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
<file source-language="en" target-language="de" datatype="plaintext" original="a"><body>
<trans-unit id="1"><source>Cancel</source><target>Abbrechen</target></trans-unit>
<trans-unit id="2"><source>No target yet</source></trans-unit>
<trans-unit id="3"><source>Hello <g id="1">world</g></source><target>Hallo <g id="1">Welt</g></target></trans-unit>
</body></file></xliff>
"""
XLIFF_2 = """<?xml version="1.0"?>
<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en" trgLang="de">
<file id="f"><unit id="u"><segment><source>Yes</source><target>Ja</target></segment></unit></file></xliff>
"""


def test_tmx_and_xliff_files_give_their_units(tmp_path: Path) -> None:
    (tmp_path / "a.tmx").write_text(TMX, encoding="utf-8")
    (tmp_path / "b.xlf").write_text(XLIFF_12, encoding="utf-8")
    (tmp_path / "c.xliff").write_text(XLIFF_2, encoding="utf-8")
    assert pairs(read(tmp_path)) == [
        ("Print now", "Jetzt drucken"),  # inline codes' content is markup, left out
        ("Line one", "Zeile eins"),  # languages found by xml:lang, whatever their order
        ("Line two", "Zeile zwei"),
        ("Cancel", "Abbrechen"),
        ("Hello world", "Hallo Welt"),
        ("Yes", "Ja"),
    ]


def test_an_xliff_of_another_target_language_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "fr.xlf"
    path.write_text(XLIFF_12.replace('target-language="de"', 'target-language="fr-FR"'), encoding="utf-8")
    with pytest.raises(UserError, match=r"fr\.xlf: its header names the language 'fr-FR'"):
        read(path)


def test_line_file_prefixes_are_read_as_before(tmp_path: Path) -> None:
    (tmp_path / "train.en").write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "train.de").write_text("x\ny\n", encoding="utf-8")
    assert pairs(read(tmp_path / "train")) == [("a", "x"), ("b", "y")]
    assert pairs(read(tmp_path)) == [("a", "x"), ("b", "y")]


def test_memory_import_reads_a_compiled_catalog(po: Path) -> None:
    with write_mo(po).open("rb") as stream:
        reader = pair_reader(stream, "demo.mo")
        got = list(reader)
    assert reader.target_lang == "de" and reader.source_lang == "en"
    assert ("Open file", "Datei öffnen") in got and ("%d files deleted", "%d Dateien gelöscht") in got
    assert all(source != "Close file" for source, _ in got)  # fuzzy: msgfmt left it out
