"""mtkit.documents.gettext: PO and POT catalogs filled by stand-in translators, judged by the field's tools (msgfmt
--check, pofilter) and on the catalogs this system's packages installed: translated entries, comments, flags,
contexts, obsolete entries and order come back byte for byte, empty entries are filled once per distinct string and
flagged fuzzy, placeholders and accelerators kept, plural forms as the target language counts them."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from mtkit.documents.formats import detect_format, open_job
from mtkit.documents.gettext import po_job
from mtkit.documents.job import DocumentError, run_jobs
from mtkit.documents.po_file import MAX_LINE, read_catalog
from tests.documents.catalog_tools import locale_catalogs, msgfmt_check, pofilter_failures, unfmt
from tests.documents.stand_ins import Recorder, upper

polib = pytest.importorskip("polib")

HEADER = """\
# German translation of app.
# Copyright (C) 2024 Someone
msgid ""
msgstr ""
"Project-Id-Version: app 1.0\\n"
"Language: de\\n"
"MIME-Version: 1.0\\n"
"Content-Type: text/plain; charset=UTF-8\\n"
"Content-Transfer-Encoding: 8bit\\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\\n"
"""
TRANSLATED = """
#. Shown in the title bar
#: src/main.c:12 src/main.c:40
#, c-format
msgid "Welcome, %s!"
msgstr "Willkommen, %s!"

msgctxt "menu"
msgid "_File"
msgstr "_Datei"

#, c-format
msgid "%d file"
msgid_plural "%d files"
msgstr[0] "%d Datei"
msgstr[1] "%d Dateien"

#~ msgid "Old string"
#~ msgstr "Alte Zeichenkette"
"""
EMPTY = """
#. A label on the toolbar
#: src/ui.c:5
msgid "_Open"
msgstr ""

#: src/ui.c:9
#, c-format
msgid "Copied %d of %s to %s.\\n"
msgstr ""

#, python-brace-format
msgid "  Hello {name}, you have {count} messages.  "
msgstr ""

#, python-format
msgid "Saved %(file)s in %(dir)s"
msgstr ""

#, c-format
#| msgid "Removed one file"
msgid "Removed %d file"
msgid_plural "Removed %d files"
msgstr[0] ""
msgstr[1] ""

msgctxt "verb"
msgid "_Open"
msgstr ""

msgid "Click <b>Save</b> to keep it. See https://example.com/help"
msgstr ""

#, fuzzy
msgid "Line one\\nLine two\\n"
msgstr ""

#~ msgid "Gone"
#~ msgstr ""
"""


def catalog(body: str, header: str = HEADER) -> bytes:
    return (header + body).encode()


def test_a_fully_translated_catalog_comes_back_byte_for_byte() -> None:
    for data in (catalog(TRANSLATED), catalog(TRANSLATED).replace(b"\n", b"\r\n"), catalog(TRANSLATED).rstrip()):
        job = open_job("app.po", data, "en", target="de")
        assert job.texts == [] and job.finish([]) == data
        assert run_jobs([job], upper) == [data]


def test_empty_entries_are_filled_and_flagged_fuzzy_and_the_rest_kept() -> None:
    data = catalog(TRANSLATED + EMPTY)
    recorder = Recorder()
    out = run_jobs([po_job(data, "app.po", "en", "de")], recorder)[0].decode()
    assert out.startswith(HEADER + TRANSLATED)  # the header and every translated entry as written
    assert recorder.asked.count("Open") == 1  # two entries, one text: asked once
    source, result = polib.pofile(data.decode()), polib.pofile(out)
    assert [
        (e.msgctxt, e.msgid, e.msgid_plural, e.comment, e.occurrences, e.previous_msgid, e.obsolete) for e in source
    ] == [(e.msgctxt, e.msgid, e.msgid_plural, e.comment, e.occurrences, e.previous_msgid, e.obsolete) for e in result]
    for before, after in zip(source, result):
        if before.obsolete or before.translated():
            assert (after.msgstr, after.msgstr_plural, after.flags) == (
                before.msgstr,
                before.msgstr_plural,
                before.flags,
            )
        else:
            assert after.flags == ["fuzzy", *[flag for flag in before.flags if flag != "fuzzy"]]
            assert after.msgstr or all(after.msgstr_plural.values())
    entry = {(e.msgctxt, e.msgid): e for e in result}
    assert entry[(None, "_Open")].msgstr == "_OPEN" and entry[("verb", "_Open")].msgstr == "_OPEN"
    assert entry[(None, "Copied %d of %s to %s.\n")].msgstr == "COPIED %d OF %s TO %s.\n"
    assert entry[(None, "  Hello {name}, you have {count} messages.  ")].msgstr == (
        "  HELLO {name}, YOU HAVE {count} MESSAGES.  "
    )
    assert entry[(None, "Saved %(file)s in %(dir)s")].msgstr == "SAVED %(file)s IN %(dir)s"
    assert entry[(None, "Removed %d file")].msgstr_plural == {0: "REMOVED %d FILE", 1: "REMOVED %d FILES"}
    assert entry[(None, "Click <b>Save</b> to keep it. See https://example.com/help")].msgstr == (
        "CLICK <b>SAVE</b> TO KEEP IT. SEE https://example.com/help"
    )
    assert entry[(None, "Line one\nLine two\n")].msgstr == "LINE ONE\nLINE TWO\n"
    assert '#~ msgid "Gone"\n#~ msgstr ""\n' in out


def test_no_fuzzy_leaves_the_flags_as_they_were() -> None:
    data = catalog(EMPTY)
    out = po_job(data, "app.po", "en", "de", fuzzy=False)
    result = polib.pofile(run_jobs([out], upper)[0].decode())
    assert [e.flags for e in result] == [e.flags for e in polib.pofile(data.decode())]


def test_plural_forms_follow_the_target_language() -> None:
    template = (
        b'msgid ""\nmsgstr ""\n"Project-Id-Version: app\\n"\n"Language: \\n"\n'
        b'"Content-Type: text/plain; charset=CHARSET\\n"\n"Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\\n"\n\n'
        b'#, c-format\nmsgid "One file"\nmsgid_plural "%d files"\nmsgstr[0] ""\nmsgstr[1] ""\n'
    )
    ru = polib.pofile(run_jobs([po_job(template, "app.pot", "en", "ru")], upper)[0].decode())
    assert ru.metadata["Language"] == "ru" and ru.metadata["Plural-Forms"].startswith("nplurals=3;")
    assert ru.metadata["Content-Type"] == "text/plain; charset=UTF-8"
    # form 0 is for 1, 21, 31 ...: it must say %d, so it gets the plural's translation
    assert ru[0].msgstr_plural == {0: "%d FILES", 1: "%d FILES", 2: "%d FILES"}
    de = polib.pofile(run_jobs([po_job(template, "app.pot", "en", "de")], upper)[0].decode())
    assert de[0].msgstr_plural == {0: "ONE FILE", 1: "%d FILES"}  # form 0 is for 1 alone
    ja = polib.pofile(run_jobs([po_job(template, "app.pot", "en", "ja")], upper)[0].decode())
    assert ja.metadata["Plural-Forms"] == "nplurals=1; plural=0;" and ja[0].msgstr_plural == {0: "%d FILES"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (HEADER.encode() + b'\nmsgid "Caf\xe9"\nmsgstr ""\n', r"^app\.po line 12: not UTF-8 text \(byte 0xe9\)"),
        (HEADER.encode() + b'\nmsgid "Hi"\nmsgstr ""\nbroken line\n', r"^app\.po line 14: not PO syntax"),
        (HEADER.encode() + b'\nmsgid "Hi\nmsgstr ""\n', r"^app\.po line 12: a string not closed by its quote$"),
        (b'msgid "' + b"a" * (MAX_LINE + 1) + b'"\nmsgstr ""\n', rf"^app\.po line 1: {MAX_LINE + 9} bytes long"),
        (HEADER.replace("UTF-8", "NO-SUCH").encode(), r"^app\.po: the header names the charset 'NO-SUCH'"),
        (b'msgid "a"\nmsgid_plural "b"\nmsgstr "c"\n', r"^app\.po line 3: msgstr does not match"),
    ],
)
def test_hostile_or_broken_catalogs_are_refused_in_one_line(data: bytes, message: str) -> None:
    with pytest.raises(DocumentError, match=message) as caught:
        open_job("app.po", data, "en")
    assert "\n" not in str(caught.value)


def test_a_catalog_in_another_charset_stays_in_it_unless_a_translation_needs_more(tmp_path: Path) -> None:
    data = (HEADER.replace("UTF-8", "ISO-8859-1") + '\nmsgid "Café"\nmsgstr ""\n').encode("latin-1")
    out = run_jobs([open_job("app.po", data, "en")], lambda texts: ["Kaffee" for _ in texts])[0]
    assert out.decode("latin-1").endswith('#, fuzzy\nmsgid "Café"\nmsgstr "Kaffee"\n')
    # A translation its charset cannot hold (a German capital sharp s): the catalog is written in UTF-8, as
    # msgconv --to-code=UTF-8 would, its header saying so; its own text unchanged.
    out = run_jobs([open_job("app.po", data, "en")], lambda texts: ["STRAẞE" for _ in texts])[0]
    text = out.decode("utf-8")
    assert "charset=UTF-8" in text and "ISO-8859-1" not in text and text.endswith('msgid "Café"\nmsgstr "STRAẞE"\n')
    (tmp_path / "app.po").write_bytes(out)
    checked = msgfmt_check(tmp_path / "app.po")
    assert checked.returncode == 0, checked.stderr


def test_the_extension_and_the_content_must_agree() -> None:
    assert detect_format("app.po", catalog(EMPTY)) == "po" and detect_format("app.pot", catalog(EMPTY)) == "po"
    with pytest.raises(DocumentError, match=r"^app\.po: the content is XLIFF, not a gettext catalog"):
        detect_format("app.po", b'<?xml version="1.0"?>\n<xliff version="1.2"/>')
    with pytest.raises(DocumentError, match=r"^app\.po: not text but a zip archive"):
        detect_format("app.po", b"PK\x03\x04" + bytes(30))


def test_msgfmt_and_pofilter_pass_the_machine_translation(tmp_path: Path) -> None:
    out = tmp_path / "app.po"
    out.write_bytes(run_jobs([po_job(catalog(TRANSLATED + EMPTY), "app.po", "en", "de")], upper)[0])
    checked = msgfmt_check(out)
    assert checked.returncode == 0, checked.stderr
    assert pofilter_failures(out, tmp_path / "failures.po", "--gnome") == []


def _emptied(data: bytes) -> bytes:
    """The catalog with every translation but the header's taken out."""
    catalog = read_catalog(data, "x.po")
    edits = []
    for entry in catalog.entries:
        if not entry.header:
            keys = [f"msgstr[{form}]" if entry.msgid_plural is not None else "msgstr" for form in sorted(entry.msgstr)]
            edits.append((entry.msgstr_line, entry.end, [f'{key} ""\n' for key in keys]))
    return catalog.written(edits).encode(catalog.charset)


def test_real_catalogs_emptied_and_filled_pass_the_fields_tools(tmp_path: Path) -> None:
    """A sample of the catalogs this system's packages installed (nobody here wrote them): the human catalog comes
    back byte for byte; emptied, every entry is filled and flagged fuzzy, entries, contexts, plurals and comments
    as the input's, msgfmt --check passes, and pofilter finds no more failures than in the human translation."""
    catalogs = locale_catalogs("de")
    if not catalogs:
        pytest.skip("no compiled German catalogs (<locale dir>/de/LC_MESSAGES/*.mo) on this system")
    for mo in random.Random(64).sample(catalogs, min(3, len(catalogs))):
        human = unfmt(mo, tmp_path / f"{mo.stem}.po")
        data = human.read_bytes()
        assert run_jobs([open_job(human.name, data, "en", target="de")], upper) == [data], mo.name
        empty = _emptied(data)
        machine = tmp_path / f"{mo.stem}.mt.po"
        machine.write_bytes(run_jobs([open_job(human.name, empty, "en", target="de")], upper)[0])
        checked = msgfmt_check(machine)
        assert checked.returncode == 0, f"{mo.name}: {checked.stderr}"
        before, after = polib.pofile(str(human)), polib.pofile(str(machine))
        shape = [(e.msgctxt, e.msgid, e.msgid_plural, sorted(e.msgstr_plural), e.comment, e.tcomment) for e in before]
        assert shape == [
            (e.msgctxt, e.msgid, e.msgid_plural, sorted(e.msgstr_plural), e.comment, e.tcomment) for e in after
        ], mo.name
        assert all("fuzzy" in e.flags and (e.msgstr or all(e.msgstr_plural.values())) for e in after if e.msgid)
        assert len(pofilter_failures(machine, tmp_path / "m.po")) <= len(pofilter_failures(human, tmp_path / "h.po"))


def test_a_big_catalog_sends_each_distinct_string_once() -> None:
    body = "".join(f'\nmsgctxt "c{i}"\nmsgid "Entry number {i % 50} is here."\nmsgstr ""\n' for i in range(5000))
    recorder = Recorder()
    run_jobs([po_job(catalog(body), "big.po", "en", "de")], recorder)
    assert len(recorder.asked) == 50 and len(set(recorder.asked)) == 50
    assert re.fullmatch(r"Entry number \d+ is here\.", recorder.asked[0])


def test_in_order_placeholders_keep_the_sources_order_and_the_ends_their_white_space(tmp_path: Path) -> None:
    body = (
        '\n#, c-format\nmsgid "Edge %s is %lu px wide\\n"\nmsgstr ""\n\nmsgid "Cannot handle file %s\\n"\nmsgstr ""\n'
    )
    body += '\n#, c-format\nmsgid "Moved %1$s to %2$s"\nmsgstr ""\n'

    def reorder(texts: list[str]) -> list[str]:
        # a model that turns the words around and loses the one stand-in of the second string
        return ["Datei." if "handle" in text else " ".join(reversed(text.split())) for text in texts]

    out = run_jobs([po_job(catalog(body), "app.po", "en", "de")], reorder)[0].decode()
    entries = {entry.msgid: entry.msgstr for entry in polib.pofile(out)}
    first = entries["Edge %s is %lu px wide\n"]
    assert first.endswith("\n") and first.index("%s") < first.index("%lu")  # %s before %lu, as the source has them
    assert entries["Cannot handle file %s\n"] == "Datei. %s\n"  # the lost %s put back, the closing \n the msgid's
    moved = entries["Moved %1$s to %2$s"]
    assert moved.index("%2$s") < moved.index("%1$s")  # positional ones may move: their order is the translator's
    (tmp_path / "app.po").write_text(out, encoding="utf-8")
    checked = msgfmt_check(tmp_path / "app.po")
    assert checked.returncode == 0, checked.stderr


def test_an_options_help_line_sends_its_description_and_keeps_its_option_column(tmp_path: Path) -> None:
    """A catalog's help line: the options as written (not stand-ins the model drops the description after), the
    description translated, the column's spacing and the msgid's closing \\n kept."""
    body = (
        '\n#, c-format\nmsgid "  -y, --side-by-side            output in two columns\\n"\nmsgstr ""\n'
        '\nmsgid "      --tabsize=NUM             tab stops every NUM (default 8) print columns"\nmsgstr ""\n'
    )
    recorder = Recorder()
    out = run_jobs([po_job(catalog(body), "diff.po", "en", "de")], recorder)[0].decode()
    assert recorder.asked == ["output in two columns", "tab stops every NUM (default 8) print columns"]
    entries = {entry.msgid: entry.msgstr for entry in polib.pofile(out)}
    assert entries["  -y, --side-by-side            output in two columns\n"] == (
        "  -y, --side-by-side            OUTPUT IN TWO COLUMNS\n"
    )
    assert entries["      --tabsize=NUM             tab stops every NUM (default 8) print columns"] == (
        "      --tabsize=NUM             TAB STOPS EVERY NUM (DEFAULT 8) PRINT COLUMNS"
    )
    (tmp_path / "diff.po").write_text(out, encoding="utf-8")
    assert msgfmt_check(tmp_path / "diff.po").returncode == 0


def test_a_description_wrapped_over_lines_is_sent_whole_and_wrapped_again(tmp_path: Path) -> None:
    """A help text wrapped at its column goes to the model as one sentence, not line by line, and its translation is
    wrapped again at the source's width, its continuation lines at the description's column."""
    source = (
        "  -n, --mindays MIN_DAYS        set minimum number of days before password\\n"
        + " " * 32
        + "change to MIN_DAYS\\n"
    )
    body = f'\n#, c-format\nmsgid "{source}"\nmsgstr ""\n'
    recorder = Recorder()
    out = run_jobs([po_job(catalog(body), "shadow.po", "en", "de")], recorder)[0].decode()
    assert recorder.asked == ["set minimum number of days before password change to MIN_DAYS"]
    msgstr = next(entry.msgstr for entry in polib.pofile(out) if entry.msgid.startswith("  -n"))
    assert msgstr == "  -n, --mindays MIN_DAYS        SET MINIMUM NUMBER OF DAYS BEFORE PASSWORD\n" + " " * 32 + (
        "CHANGE TO MIN_DAYS\n"
    )
    (tmp_path / "shadow.po").write_text(out, encoding="utf-8")
    assert msgfmt_check(tmp_path / "shadow.po").returncode == 0


def test_a_tables_cells_are_sent_one_by_one_and_their_spacing_kept() -> None:
    """A table's header in a catalog (netstat's, route's): its cells aligned by runs of spaces, each cell sent alone
    (as one sentence the model drops most of them) and the spaces between them kept."""
    header = "Destination     Gateway         Genmask         Flags Metric Ref    Use Iface\\n"
    recorder = Recorder()
    out = run_jobs([po_job(catalog(f'\nmsgid "{header}"\nmsgstr ""\n'), "net.po", "en", "de")], recorder)[0].decode()
    assert recorder.asked == ["Destination", "Gateway", "Genmask", "Flags Metric Ref", "Use Iface"]
    msgstr = next(entry.msgstr for entry in polib.pofile(out) if entry.msgid.startswith("Destination"))
    assert msgstr == "DESTINATION     GATEWAY         GENMASK         FLAGS METRIC REF    USE IFACE\n"


def test_a_placeholder_the_model_invents_or_doubles_is_taken_out(tmp_path: Path) -> None:
    """A model that learnt catalogs' `%s` writes one of its own now and then, or a second `%lu` beside the one put
    back: the program would pass no argument for it (msgfmt --check sees it in a c-format entry)."""
    body = '\n#, c-format\nmsgid "Failed to set locktime for UID %lu\\n"\nmsgstr ""\n'
    body += '\nmsgid "unsupported argument"\nmsgstr ""\n'

    def inventive(texts: list[str]) -> list[str]:
        return [f"{text} %s" if "argument" in text else text.replace("UID", "UID 1") for text in texts]

    out = run_jobs([po_job(catalog(body), "shadow.po", "en", "de")], inventive)[0].decode()
    entries = {entry.msgid: entry.msgstr for entry in polib.pofile(out)}
    assert entries["unsupported argument"] == "unsupported argument"
    assert entries["Failed to set locktime for UID %lu\n"].count("%lu") == 1
    (tmp_path / "shadow.po").write_text(out, encoding="utf-8")
    assert msgfmt_check(tmp_path / "shadow.po").returncode == 0


def test_a_fuzzy_match_of_the_whole_msgid_fills_it_for_review_with_its_placeholders() -> None:
    """What a memory's fuzzy match gives a whole msgid (Job.patched, Job.offered, set by run_jobs' `review`) is
    written flagged fuzzy: a patched match as it is; an offered target where the model's output departs from it;
    neither where it would not hold the msgid's own placeholders."""
    data = b"""msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

msgid "Insert %s after the archive."
msgstr ""

msgid "Delete the archive."
msgstr ""

msgid "Delete %s and %s now."
msgstr ""
"""
    job = po_job(data, "app.po", "en", "de")

    def review(units: list[str]) -> tuple[dict[str, str], dict[str, str]]:
        assert units == ["Insert %s after the archive.", "Delete the archive.", "Delete %s and %s now."]
        patched = {units[0]: "%s nach dem Archiv einfügen."}
        return patched, {units[1]: "Das Archiv löschen.", units[2]: "%s jetzt löschen."}

    found = {tuple(lines[-2:]) for lines in [block.splitlines() for block in
             run_jobs([job], upper, review=review)[0].decode().split("\n\n")] if len(lines) >= 2}  # fmt: skip
    assert ('msgid "Insert %s after the archive."', 'msgstr "%s nach dem Archiv einfügen."') in found
    assert ('msgid "Delete the archive."', 'msgstr "Das Archiv löschen."') in found  # "DELETE THE ARCHIVE." departs
    assert ('msgid "Delete %s and %s now."', 'msgstr "DELETE %s AND %s NOW."') in found  # one %s: not offered
    text = run_jobs([po_job(data, "app.po", "en", "de")], upper, review=review)[0].decode()
    assert text.count("#, fuzzy") == 3
