"""`mtkit translate-file --memory` on a PO catalog and XLIFF 1.2 and 2.0 files, through the command line with the test
model: an entry a memory's 100% match answers is filled with its target and not flagged for review (PO: no fuzzy
flag; XLIFF 1.2: state="translated", state-qualifier="exact-match"), while one the model translated, a fuzzy match
reported or none, is flagged as a machine translation is without a memory; the catalog passes `msgfmt --check`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree

RUN = Path(__file__).resolve().parents[1] / "data" / "run-0681275"
ROOT = Path(__file__).resolve().parents[2]
EXACT = ("The dog runs in the snow.", "Der Hund rennt im Schnee.")
NEAR = "The dog runs in the deep snow."  # a fuzzy match of EXACT's source: reported, translated by the model
OTHER = "A man rides a bicycle."
# A help text the memory holds whole (its columns spaced otherwise): matched as a unit, as a CAT tool matches it,
# though the catalog's sentences (an option, its description) never stood alone in the memory.
HELP = (
    "  -b, --bytes      print SIZE in bytes\\n",
    "-b, --bytes print SIZE in bytes",
    "-b, --bytes    SIZE in Byte ausgeben",
)

PO = f"""msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"
"Language: de\\n"

#: app.py:1
msgid "{EXACT[0]}"
msgstr ""

#: app.py:2
msgid "{NEAR}"
msgstr ""

#: app.py:3
msgid "{OTHER}"
msgstr ""

#: app.py:5
msgid "{HELP[0]}"
msgstr ""

#: app.py:4
msgid "Kept."
msgstr "Behalten."
"""

XLIFF_1 = f"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file source-language="en" target-language="de" datatype="plaintext" original="app">
    <body>
      <trans-unit id="1"><source>{EXACT[0]}</source></trans-unit>
      <trans-unit id="2"><source>{NEAR}</source></trans-unit>
    </body>
  </file>
</xliff>
"""

XLIFF_2 = f"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en" trgLang="de">
  <file id="f"><unit id="1"><segment><source>{EXACT[0]}</source></segment></unit>
    <unit id="2"><segment><source>{OTHER}</source></segment></unit></file>
</xliff>
"""


def mtkit(*args: object) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "mtkit", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("memory")
    (folder / "m.tsv").write_text(f"{EXACT[0]}\t{EXACT[1]}\n{HELP[1]}\t{HELP[2]}\n", encoding="utf-8")
    state = folder / "state.sqlite3"
    done = mtkit("memory", "import", folder / "m.tsv", "--name", "m", "--source-lang", "en", "--target-lang", "de",
                 "--state", state)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return state


def translated(state: Path, tmp_path: Path, name: str, text: str, *options: str) -> str:
    (tmp_path / name).write_text(text, encoding="utf-8")
    out = tmp_path / f"out-{name}"
    done = mtkit("translate-file", RUN, tmp_path / name, "-o", out, "--memory", "m", "--state", state, *options)
    assert done.returncode == 0, done.stderr
    return out.read_text(encoding="utf-8")


def entries(po: str) -> dict[str, list[str]]:
    """Each entry's lines by its msgid."""
    found: dict[str, list[str]] = {}
    for block in po.split("\n\n"):
        ids = [line for line in block.splitlines() if line.startswith("msgid ")]
        if ids:
            found[ids[0][len('msgid "') : -1]] = block.splitlines()
    return found


def test_a_po_entry_a_100_percent_match_fills_is_not_fuzzy(state: Path, tmp_path: Path) -> None:
    po = translated(state, tmp_path, "app.po", PO)
    found = entries(po)
    assert f'msgstr "{EXACT[1]}"' in found[EXACT[0]] and "#, fuzzy" not in found[EXACT[0]]
    for machine in (NEAR, OTHER):
        assert "#, fuzzy" in found[machine] and 'msgstr ""' not in found[machine]
    assert "#, fuzzy" not in found["Kept."] and 'msgstr "Behalten."' in found["Kept."]
    assert f'msgstr "  {HELP[2]}\\n"' in found[HELP[0]] and "#, fuzzy" not in found[HELP[0]]  # the msgid's ends
    if shutil.which("msgfmt"):
        check = subprocess.run(["msgfmt", "--check", "-o", "/dev/null", str(tmp_path / "out-app.po")], text=True,
                               capture_output=True)  # fmt: skip
        assert check.returncode == 0, check.stderr
    unflagged = entries(translated(state, tmp_path, "plain.po", PO, "--no-fuzzy"))
    assert not any("#, fuzzy" in lines for lines in unflagged.values())


def test_an_xliff_target_a_100_percent_match_gives_is_not_for_review(state: Path, tmp_path: Path) -> None:
    q = "{urn:oasis:names:tc:xliff:document:1.2}"
    root = etree.fromstring(translated(state, tmp_path, "app.xlf", XLIFF_1).encode())
    units = {unit.get("id"): unit.find(q + "target") for unit in root.iter(q + "trans-unit")}
    assert units["1"].text == EXACT[1]
    assert (units["1"].get("state"), units["1"].get("state-qualifier")) == ("translated", "exact-match")
    assert (units["2"].get("state"), units["2"].get("state-qualifier")) == ("needs-review-translation", "mt-suggestion")
    assert units["2"].text
    q = "{urn:oasis:names:tc:xliff:document:2.0}"
    root = etree.fromstring(translated(state, tmp_path, "app2.xlf", XLIFF_2).encode())
    segments = list(root.iter(q + "segment"))
    assert segments[0].find(q + "target").text == EXACT[1] and segments[1].find(q + "target").text
    assert [segment.get("state") for segment in segments] == ["translated", "translated"]  # 2.x has no review state
