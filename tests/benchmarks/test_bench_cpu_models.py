"""The cpu_models benchmark's own logic, without a model: runaway lines counted by words, stutters inside words,
--model parsed, and the picture drawn as a PNG of BLEU against sentences/s."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT

BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture
def scenario(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # benchmarks/run.py puts benchmarks/ first on the path: the scenarios import harness as top level
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("scenarios.cpu_models")


def test_a_runaway_is_more_than_twice_the_source_in_words(scenario: ModuleType) -> None:
    sources = ["A dog runs.", "Two men.", "A cat."]
    outputs = ["Ein Hund rennt rennt rennt rennt rennt.", "Zwei Männer Männer Männer.", "Eine Katze."]
    assert scenario.runaways(sources, outputs) == 1  # 7 words > 6; 4 words = 2 x 2 is not more


def test_a_stutter_is_a_loop_inside_a_word(scenario: ModuleType) -> None:
    outputs = ["Ein Mann betritt eine Dababababel.", "Ein Schifffahrtsschiff.", "Ein GARARARARe wartet.", "Ein Hund."]
    assert scenario.stutters(outputs) == 2


def test_models_are_named_runs(scenario: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    assert scenario.named_runs([f"small={tmp_path / 'a'}"]) == {"small": (tmp_path / "a").resolve()}
    with pytest.raises(SystemExit, match="NAME=RUN_DIR"):
        scenario.named_runs([str(tmp_path / "a")])
    with pytest.raises(SystemExit, match="NAME=RUN_DIR"):
        scenario.named_runs([f"gone={tmp_path / 'b'}"])


def test_levers_go_to_named_models_only(scenario: ModuleType, tmp_path: Path) -> None:
    import argparse

    (tmp_path / "a").mkdir()
    args = argparse.Namespace(teacher=str(tmp_path / "a"), model=[f"a={tmp_path / 'a'}"], levers=["a", "b"])
    with pytest.raises(SystemExit, match=r"--levers b: not a --model NAME \(a\)"):
        scenario.run(args)


def test_the_picture_is_a_png(scenario: ModuleType, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is not installed: pip install -e '.[plots]'")
    rows = [
        {"model": "teacher", "setting": "fp32, beam 4", "sacreBLEU": 39.5, "sent/s": 266.5},
        {"model": "ensemble of 4", "setting": "torch, fp32, beam 4", "sacreBLEU": 41.0, "sent/s": 40.0},
        {"model": "student", "setting": "int8, greedy", "sacreBLEU": 39.6, "sent/s": 900.0},
    ]
    path = tmp_path / "docs" / "picture.png"
    scenario.picture(rows, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
