"""benchmarks/scenarios/software.py's own logic, without a model: each package's entries cut 80/20 by a seeded
shuffle, a test msgid counted once, and placeholders counted kept only where the output holds the source's own."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT


@pytest.fixture
def scenario(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("scenarios.software")


def write_mo(path: Path, pairs: list[tuple[str, str]]) -> None:
    polib = pytest.importorskip("polib")
    catalog = polib.POFile()
    catalog.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Language": "de"}
    for source, target in pairs:
        catalog.append(polib.POEntry(msgid=source, msgstr=target))
    catalog.save_as_mofile(str(path))


def test_each_package_is_cut_80_20_and_a_repeated_msgid_is_tested_once(scenario: ModuleType, tmp_path: Path) -> None:
    first = [(f"String {k}", f"Zeichenkette {k}") for k in range(10)]
    second = [(f"Other {k}", f"Andere {k}") for k in range(5)] + [("String 3", "Zeichenkette drei")]
    write_mo(tmp_path / "a.mo", first)
    write_mo(tmp_path / "b.mo", second)
    memory, test = scenario.split_packages(tmp_path, seed=1)
    assert len(memory) == 8 + 5  # round(0.8 * 10) and round(0.8 * 6)
    packages = [package for package, _, _ in test]
    assert packages.count("a") == 2 and packages.count("b") <= 1
    assert len({source for _, source, _ in test}) == len(test)  # each msgid once
    assert set(memory) | {(s, t) for _, s, t in test} <= set(first) | set(second)
    assert scenario.split_packages(tmp_path, seed=1) == (memory, test)  # seeded
    assert scenario.split_packages(tmp_path, seed=2) != (memory, test)


def test_placeholders_kept_counts_only_sources_that_hold_one(scenario: ModuleType) -> None:
    sources = ["Delete %d files in %s", "No placeholder", "Open {name}"]
    outputs = ["%d Dateien in %s löschen", "Kein Platzhalter", "{title} öffnen"]
    assert scenario.placeholders_kept(sources, outputs) == (1, 2)
    assert scenario.placeholders_kept(sources, ["%s Dateien in %d", "x", "{name} öffnen"]) == (2, 2)  # any order
