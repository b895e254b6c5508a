"""The field's own tools for the catalog tests, each found or its test skipped with the reason: GNU gettext's msgfmt
and msgunfmt, translate-toolkit's pofilter, po2xliff and xliff2po, and the catalogs the system's packages installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

POFILTER_TESTS = ("variables", "printf", "accelerators", "xmltags")


def tool(name: str) -> str:
    """A command beside this Python (translate-toolkit's) or on PATH (gettext's); the test skipped without it."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (GNU gettext: apt-get install gettext; translate-toolkit: pip)")
    return found


def msgfmt_check(path: Path) -> subprocess.CompletedProcess[str]:
    """msgfmt --check on the catalog, fuzzy entries included (so the machine's are checked too)."""
    command = [tool("msgfmt"), "--check", "--use-fuzzy", "-o", "/dev/null", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def pofilter_failures(path: Path, out: Path, *options: str) -> list[str]:
    """The (pofilter) notes of the variables, printf, accelerators and xmltags checks on the file's entries."""
    tests = [arg for test in POFILTER_TESTS for arg in ("-t", test)]
    command = [tool("pofilter"), "--progress=none", *options, *tests, "-i", str(path), "-o", str(out)]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    return re.findall(r"^# \(pofilter\) (.*)$", out.read_text(encoding="utf-8"), re.M) if out.exists() else []


def locale_catalogs(language: str = "de") -> list[Path]:
    """The compiled catalogs packages installed for `language`, wherever this system keeps them."""
    roots = [Path(sys.prefix) / "share" / "locale", Path("/usr/share/locale"), Path("/usr/local/share/locale")]
    found = sorted({path for root in roots for path in root.glob(f"{language}/LC_MESSAGES/*.mo")})
    return found


def unfmt(mo: Path, out: Path) -> Path:
    """The .mo turned back into a PO file by msgunfmt."""
    subprocess.run([tool("msgunfmt"), str(mo), "-o", str(out)], check=True, capture_output=True, timeout=60)
    return out
