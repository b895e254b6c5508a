"""mtkit/memory/tmx.py: TMX 1.4b read as a stream (languages from the header or given, inline codes left out, units
without both languages skipped) and written back; hostile files (XXE, a billion laughs, broken XML, not TMX, wrong
languages) each a one-line UserError naming the file; a large file read in bounded memory."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from mtkit.errors import UserError
from mtkit.memory.tmx import TmxReader, write_tmx
from tests.conftest import ROOT

TMX = b"""<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4"><header srclang="en-US" datatype="plaintext" segtype="sentence" adminlang="en"
 creationtool="t" creationtoolversion="1" o-tmf="t"/>
<body>
<tu><tuv xml:lang="en-US"><seg>Click <bpt i="1">&lt;b&gt;</bpt>Save<ept i="1">&lt;/b&gt;</ept> now.</seg></tuv>
<tuv xml:lang="de-DE"><seg>Klicken Sie jetzt auf <hi>Speichern</hi>.</seg></tuv></tu>
<tu><tuv xml:lang="en-US"><seg>Only English.</seg></tuv></tu>
<tu><tuv xml:lang="en-US"><seg>A dog runs.</seg></tuv><tuv xml:lang="de-DE"><seg>Ein Hund rennt.</seg></tuv></tu>
</body></tmx>"""


def read(data: bytes, source: str = "", target: str = "") -> tuple[list[tuple[str, str]], TmxReader]:
    reader = TmxReader(io.BytesIO(data), "m.tmx", source, target)
    return list(reader), reader


def test_pairs_languages_inline_codes_and_skipped_units() -> None:
    pairs, reader = read(TMX)
    assert pairs == [("Click Save now.", "Klicken Sie jetzt auf Speichern."), ("A dog runs.", "Ein Hund rennt.")]
    assert (reader.source_lang, reader.target_lang, reader.skipped) == ("en", "de", 1)


def test_written_tmx_reads_back_the_same_pairs() -> None:
    pairs = [("A <b> & c", "Ein <b> & c"), ("Zwei\nZeilen?", "Two\nlines")]
    out = io.BytesIO()
    assert write_tmx(iter(pairs), out, "en", "de") == 2
    assert read(out.getvalue())[0] == pairs


def test_characters_xml_cannot_hold_are_left_out_not_an_error() -> None:
    """A catalog's terminal escapes and a stray control byte (binutils' and glibc's catalogs hold them) once stopped
    an export with lxml's ValueError; tab and line breaks are kept."""
    pairs = [("\x1b[1mbold\x1b[0m\tand\x07", "\x1b[1mfett\x1b[0m\tund\x00"), ("plain", "schlicht")]
    out = io.BytesIO()
    assert write_tmx(iter(pairs), out, "en", "de") == 2
    assert read(out.getvalue())[0] == [("[1mbold[0m\tand", "[1mfett[0m\tund"), ("plain", "schlicht")]


@pytest.mark.parametrize(
    "data, message",
    [
        (b'<?xml version="1.0"?><!DOCTYPE tmx [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
         b'<tmx version="1.4"><header srclang="en"/><body><tu><tuv xml:lang="en"><seg>&x;</seg></tuv>'
         b'<tuv xml:lang="de"><seg>a</seg></tuv></tu></body></tmx>', "declares entities"),
        (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>'
         b'<tmx><header srclang="en"/><body><tu><tuv xml:lang="en"><seg>&lol2;</seg></tuv></tu></body></tmx>',
         "declares entities"),
        (b'<tmx version="1.4"><header srclang="en"/><body><tu><tuv xml:lang="en"><seg>a</seg>', "not well-formed"),
        (b"", "not well-formed"),
        (b'<xliff version="1.2"/>', "not TMX"),
        (b'<tmx><header/><body><tu><tuv xml:lang="en"><seg>a</seg></tuv></tu></body></tmx>', "srclang"),
    ],
)  # fmt: skip
def test_hostile_and_broken_files_are_one_line_errors(data: bytes, message: str) -> None:
    with pytest.raises(UserError) as refused:
        read(data)
    assert message in str(refused.value) and str(refused.value).startswith("m.tmx") and "\n" not in str(refused.value)


def test_languages_the_file_lacks_give_no_pairs() -> None:
    pairs, reader = read(TMX, "en", "fr")
    assert pairs == [] and reader.skipped == 3


def test_a_large_file_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """A 30 MB file read in a fresh interpreter: its peak memory grows by far less than the file (the parser's tree
    is cleared unit by unit; kept whole, libxml2's tree would be several times the file)."""
    unit = b'<tu><tuv xml:lang="en"><seg>Sentence number %d with some words.</seg></tuv>' \
           b'<tuv xml:lang="de"><seg>Satz Nummer %d mit einigen W\xc3\xb6rtern.</seg></tuv></tu>\n'  # fmt: skip
    path = tmp_path / "big.tmx"
    with open(path, "wb") as out:
        out.write(b'<tmx version="1.4"><header srclang="en"/><body>')
        for start in range(0, 240_000, 10_000):
            out.write(b"".join(unit % (i, i) for i in range(start, start + 10_000)))
        out.write(b"</body></tmx>")
    code = (
        "import resource, sys\nfrom mtkit.memory.tmx import TmxReader\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"count = sum(1 for _ in TmxReader(open({str(path)!r}, 'rb'), 'big.tmx'))\n"
        "print(count, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    count, grown_kib = map(int, run.stdout.split())
    assert count == 240_000
    assert grown_kib * 1024 < path.stat().st_size / 3, (grown_kib, path.stat().st_size)
