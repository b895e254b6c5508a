"""mtkit.documents.xliff: XLIFF 1.2 and 2.x files filled by stand-in translators: targets in the specification's
machine-translation state, inline codes around and between the translated words, translate="no", existing targets
and notes kept; hostile XML refused; po2xliff's XLIFF filled and brought back by xliff2po passes msgfmt --check."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from lxml import etree

from mtkit.documents.formats import detect_format, open_job
from mtkit.documents.job import DocumentError, run_jobs
from tests.documents.catalog_tools import msgfmt_check, tool
from tests.documents.stand_ins import Recorder, upper

X12 = "urn:oasis:names:tc:xliff:document:1.2"
X20 = "urn:oasis:names:tc:xliff:document:2.0"
XLIFF12 = f"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="{X12}">
  <file original="app" source-language="en" target-language="de" datatype="plaintext">
    <body>
      <trans-unit id="1">
        <source>Click <g id="g1">Save</g> to keep <x id="x1"/> files.</source>
        <note>A button's label</note>
      </trans-unit>
      <trans-unit id="2">
        <source>Already done.</source>
        <target state="translated">Schon erledigt.</target>
      </trans-unit>
      <trans-unit id="3" translate="no">
        <source>Brand Name</source>
      </trans-unit>
      <group translate="no"><trans-unit id="4"><source>Inside a group</source></trans-unit></group>
      <trans-unit id="5">
        <source>Copied %d of %s.</source>
        <target/>
      </trans-unit>
    </body>
  </file>
</xliff>
"""
XLIFF20 = f"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="2.1" xmlns="{X20}" srcLang="en">
  <file id="f1">
    <unit id="u1">
      <notes><note>Keep it short</note></notes>
      <originalData><data id="d1">&lt;br/&gt;</data></originalData>
      <segment><source>Open <pc id="1">the file</pc><ph id="2" dataRef="d1"/> now.</source></segment>
      <ignorable><source> </source></ignorable>
      <segment state="reviewed"><source>Done.</source><target>Fertig.</target></segment>
      <segment><source>Use <mrk id="m1" translate="no">mtkit</mrk> daily.</source></segment>
    </unit>
    <unit id="u2" translate="no"><segment><source>Not this</source></segment></unit>
  </file>
</xliff>
"""


def test_xliff_12_units_get_targets_in_the_machine_state() -> None:
    recorder = Recorder()
    out = run_jobs([open_job("app.xlf", XLIFF12.encode(), "en")], recorder)[0]
    root = etree.fromstring(out)
    q = f"{{{X12}}}"
    units = {unit.get("id"): unit for unit in root.iter(q + "trans-unit")}
    first = units["1"].find(q + "target")
    assert etree.tostring(first, encoding="unicode", with_tail=False).split(">", 1)[1] == (
        'CLICK <g id="g1">SAVE</g> TO KEEP <x id="x1"/> FILES.</target>'
    )
    assert first.get("state") == "needs-review-translation" and first.get("state-qualifier") == "mt-suggestion"
    assert units["1"].find(q + "note").text == "A button's label"
    assert units["2"].find(q + "target").text == "Schon erledigt."
    assert units["3"].find(q + "target") is None and units["4"].find(q + "target") is None
    assert units["5"].find(q + "target").text == "COPIED %d OF %s."
    assert not any("Brand" in text or "group" in text or "Already" in text for text in recorder.asked)
    assert [unit.find(q + "source").text for unit in root.iter(q + "trans-unit")] == [
        unit.find(q + "source").text for unit in etree.fromstring(XLIFF12.encode()).iter(q + "trans-unit")
    ]


def test_xliff_2_segments_get_targets_and_their_state() -> None:
    out = run_jobs([open_job("app.xliff", XLIFF20.encode(), "en", target="de")], upper)[0]
    root = etree.fromstring(out)
    q = f"{{{X20}}}"
    assert root.get("trgLang") == "de"
    segments = list(root.iter(q + "segment"))
    first = segments[0].find(q + "target")
    assert etree.tostring(first, encoding="unicode", with_tail=False).split(">", 1)[1] == (
        'OPEN <pc id="1">THE FILE</pc><ph id="2" dataRef="d1"/> NOW.</target>'
    )
    assert segments[0].get("state") == "translated"
    assert segments[1].get("state") == "reviewed" and segments[1].find(q + "target").text == "Fertig."
    third = etree.tostring(segments[2].find(q + "target"), encoding="unicode", with_tail=False)
    assert '<mrk id="m1" translate="no">mtkit</mrk>' in third and "USE" in third
    assert segments[3].find(q + "target") is None
    assert root.find(f".//{q}ignorable/{q}target") is None and root.find(f".//{q}note").text == "Keep it short"


def test_xliff_2_without_a_target_language_needs_one() -> None:
    with pytest.raises(DocumentError, match=r"^app\.xlf: the file names no target language \(trgLang\)"):
        open_job("app.xlf", XLIFF20.encode(), "en")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b'<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
            b'<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file><body><trans-unit id="1">'
            b"<source>&xxe;</source></trans-unit></body></file></xliff>",
            r"^app\.xlf: the XML declares entities",
        ),
        (b'<xliff version="1.2"><file>', r"^app\.xlf: not well-formed XML"),
        (b"<html><body>Hi</body></html>", r"^app\.xlf: the content is not XLIFF"),
        (b'<xliff xmlns="urn:other"/>', r"^app\.xlf: not XLIFF 1\.2 or 2\.x"),
    ],
)
def test_hostile_or_foreign_xml_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        open_job("app.xlf", data, "en", target="de")


def test_detect_format_names_xliff() -> None:
    assert detect_format("a.xlf", XLIFF12.encode()) == "xlf" and detect_format("a.xliff", XLIFF20.encode()) == "xlf"


def test_po2xliff_output_is_filled_and_xliff2po_passes_msgfmt(tmp_path: Path) -> None:
    po = tmp_path / "app.po"
    po.write_text(
        'msgid ""\nmsgstr ""\n"Language: de\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n'
        '"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n\n'
        '#, c-format\nmsgid "Copied %d of %s.\\n"\nmsgstr ""\n\nmsgctxt "menu"\nmsgid "Open the file"\nmsgstr ""\n\n'
        '#, c-format\nmsgid "%d file"\nmsgid_plural "%d files"\nmsgstr[0] ""\nmsgstr[1] ""\n',
        encoding="utf-8",
    )
    xlf, back = tmp_path / "app.xlf", tmp_path / "back.po"
    subprocess.run([tool("po2xliff"), "--progress=none", "-i", str(po), "-o", str(xlf)], check=True, timeout=120)
    data = xlf.read_bytes()
    filled = run_jobs([open_job("app.xlf", data, "en", target="de")], upper)[0]
    xlf.write_bytes(filled)
    root = etree.fromstring(filled)
    units = [element for element in root.iter() if etree.QName(element).localname == "trans-unit"]
    assert units and all((unit[1].text or "").strip() for unit in units)  # every target filled
    sources = [element.text for element in root.iter() if etree.QName(element).localname == "source"]
    assert sources == [e.text for e in etree.fromstring(data).iter() if etree.QName(e).localname == "source"]
    subprocess.run([tool("xliff2po"), "--progress=none", "-i", str(xlf), "-o", str(back)], check=True, timeout=120)
    checked = msgfmt_check(back)
    assert checked.returncode == 0, checked.stderr
    assert "COPIED %d OF %s.\\n" in back.read_text(encoding="utf-8")
