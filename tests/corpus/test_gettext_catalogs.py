"""The machine's gettext catalogs gathered into a corpus (mtkit/corpus/gettext_catalogs.py, `mtkit collect-catalogs`):
a fake locale directory built here, the catalogs found by language, packages held out the same on every run, a
source package's catalogs kept together, the refusal where there are none, the command as a real process."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from mtkit.corpus.gettext_catalogs import (
    CatalogsConfig,
    assign_splits,
    collect_catalogs,
    find_catalogs,
    held_out_order,
    package_of,
)
from mtkit.errors import UserError
from tests.conftest import ROOT


def mo_bytes(entries: dict[str, str], language: str = "de") -> bytes:
    """A little-endian MO file as msgfmt lays it out: header, two (length, offset) tables, then the strings."""
    items = sorted({"": f"Language: {language}\nContent-Type: text/plain; charset=UTF-8\n", **entries}.items())
    keys, values = [k.encode() for k, _ in items], [v.encode() for _, v in items]
    start = 28 + 16 * len(items)
    tables, blob = [b"", b""], b""
    for side, strings in enumerate((keys, values)):
        for text in strings:
            tables[side] += struct.pack("<2I", len(text), start + len(blob))
            blob += text + b"\0"
    header = struct.pack("<7I", 0x950412DE, 0, len(items), 28, 28 + 8 * len(items), 0, 0)
    return header + tables[0] + tables[1] + blob


def catalog(locale_dir: Path, folder: str, domain: str, entries: dict[str, str]) -> Path:
    path = locale_dir / folder / "LC_MESSAGES" / f"{domain}.mo"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(mo_bytes(entries))
    return path


@pytest.fixture
def locale_dir(tmp_path: Path) -> Path:
    """Eight German packages of two entries each (one also in de_AT), one only in de_AT, a French one, a variant."""
    root = tmp_path / "locale"
    for n in range(8):
        catalog(root, "de", f"pkg{n}", {f"Open {n}": f"Öffne {n}", f"Close {n}\nnow": f"Schließe {n}\njetzt"})
    catalog(root, "de_AT", "pkg0", {"Open 0": "Öffne 0 (AT)"})
    catalog(root, "de_AT", "austrian", {"January": "Jänner"})
    catalog(root, "de@hebrew", "variant", {"Yes": "Ja"})
    catalog(root, "fr", "pkg0", {"Open 0": "Ouvrir 0"})
    (root / "de" / "LC_MESSAGES" / "pkg0-alias.mo").symlink_to(root / "de" / "LC_MESSAGES" / "pkg0.mo")
    return root


def test_catalogs_of_the_language_are_found_plain_folder_first(locale_dir: Path) -> None:
    found = find_catalogs(locale_dir, "de")
    assert sorted(found) == ["austrian", *(f"pkg{n}" for n in range(8))]  # no fr, no @variant, no link twice
    assert found["pkg0"].parent.parent.name == "de" and found["austrian"].parent.parent.name == "de_AT"


def test_held_out_packages_do_not_depend_on_order_or_on_a_package_added_after_them() -> None:
    packages = [f"package-{n}" for n in range(30)]
    splits = assign_splits(packages, 3, 2)
    assert splits == assign_splits(list(reversed(packages)), 3, 2)
    assert len(splits["valid"]) == 3 and len(splits["test"]) == 2 and len(splits["train"]) == 25
    assert not set(splits["valid"]) & set(splits["test"])
    held = set(splits["valid"]) | set(splits["test"])
    last_held = max(held_out_order(packages).index(name) for name in held)
    newcomer = next(f"new-{n}" for n in range(1000) if held_out_order([*packages, f"new-{n}"])[last_held] in held)
    grown = assign_splits([*packages, newcomer], 3, 2)
    assert grown["valid"] == splits["valid"] and grown["test"] == splits["test"]


def test_holding_out_every_package_is_refused() -> None:
    with pytest.raises(UserError, match="3 packages cannot hold out 2 for validation and 1 for test"):
        assign_splits(["a", "b", "c"], 2, 1)


def test_a_source_package_s_catalogs_go_together(locale_dir: Path, tmp_path: Path) -> None:
    found = find_catalogs(locale_dir, "de")
    dpkg = tmp_path / "dpkg"
    (dpkg / "info").mkdir(parents=True)
    (dpkg / "info" / "bin-one:amd64.list").write_text(f"/usr\n{found['pkg1']}\n{found['pkg2']}\n")
    (dpkg / "info" / "bin-two.list").write_text(f"{found['pkg3']}\n")
    (dpkg / "status").write_text("Package: bin-one\nSource: suite (1.0-1)\n\nPackage: bin-two\nSource: suite\n")
    owner = package_of(found, dpkg)
    assert owner["pkg1"] == owner["pkg2"] == owner["pkg3"] == "suite"
    assert owner["pkg4"] == "pkg4"  # dpkg owns none: its own name


def test_collect_copies_each_split_and_writes_its_summary_and_lines(locale_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    cfg = CatalogsConfig(locale_dir=str(locale_dir), valid_packages=2, test_packages=1)
    summary = collect_catalogs(cfg, out, quiet=True, dpkg_dir=tmp_path / "no-dpkg")
    splits = summary["splits"]
    files = {split: sorted(p.stem for p in (out / split).glob("*.mo")) for split in ("train", "valid", "test")}
    assert {split: sorted(splits[split]["packages"]) for split in files} == files
    assert sum(len(names) for names in files.values()) == 9 and len(files["valid"]) == 2 and len(files["test"]) == 1
    assert json.loads((out / "catalogs.json").read_text(encoding="utf-8"))["splits"] == splits
    # Each package's two entries give three pairs (the second is two lines on both sides); austrian's one gives one.
    test_pairs = 1 if files["test"] == ["austrian"] else 3
    assert splits["test"]["pairs"] == test_pairs
    assert len((out / "lines" / "test.de").read_text(encoding="utf-8").splitlines()) == test_pairs
    assert len((out / "lines" / "test.en").read_text(encoding="utf-8").splitlines()) == test_pairs
    again = collect_catalogs(cfg, out, quiet=True, dpkg_dir=tmp_path / "no-dpkg")
    assert again["splits"] == splits  # the same draw, the earlier files replaced


def test_no_catalogs_of_the_language_is_one_line_saying_what_to_install(locale_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"no gettext catalogs for 'nl'.*l10n") as caught:
        collect_catalogs(CatalogsConfig(target_lang="nl", locale_dir=str(locale_dir)), tmp_path / "out", quiet=True)
    assert "\n" not in str(caught.value) and str(locale_dir) in str(caught.value)


def test_the_command_collects_and_prints_its_summary(locale_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["--target-lang", "de", "--locale-dir", str(locale_dir), "--out", str(out), "--valid-packages", "1"]
    run = subprocess.run(
        [sys.executable, "-m", "mtkit", "collect-catalogs", *args, "--test-packages", "1", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert [len(summary["splits"][split]["packages"]) for split in ("train", "valid", "test")] == [7, 1, 1]
    assert (out / "catalogs.json").is_file()
