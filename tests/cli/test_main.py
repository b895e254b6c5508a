"""The `mtkit` command line run for real: its commands, one-line errors with exit 2, and what each command
passes to the library (the options left out keep their defaults: the dataclasses' or the run's recipe)."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mtkit.cli.main import app
from mtkit.engines.config import EngineConfig
from mtkit.search.config import SearchOverrides
from mtkit.serve.config import CLI_DEFAULTS, ServeConfig

COMMANDS = ("preprocess", "train", "average", "translate", "score", "score-pairs", "export", "import", "serve")
# `python -m mtkit` with torch made unimportable: a command that imports it fails loudly.
MTKIT_WITHOUT_TORCH = (
    sys.executable,
    "-c",
    "import sys; sys.modules['torch'] = None; from mtkit.cli.main import main; main()",
)


def mtkit(*args: str, stdin: str = "") -> Any:
    """`mtkit ARGS` in this process (CliRunner): exit_code, stdout and stderr apart. `mtkit translate` sets SIGPIPE
    to its default for its own process (`| head` ends it quietly): here the test process's setting is put back."""
    sigpipe = signal.getsignal(signal.SIGPIPE)
    try:
        return CliRunner().invoke(app, list(args), input=stdin)
    finally:
        signal.signal(signal.SIGPIPE, sigpipe)


def assert_one_line_error(result: Any, *words: str) -> None:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert all(word in lines[0] for word in words), lines[0]


def test_help_lists_every_command_without_importing_torch() -> None:
    run = subprocess.run(
        [*MTKIT_WITHOUT_TORCH, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert run.returncode == 0, run.stderr
    listed = [line.split()[1] for line in run.stdout.splitlines() if line.startswith("│ ") and len(line.split()) > 2]
    assert set(COMMANDS) <= set(listed), run.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    result = mtkit(command, "--help")
    assert result.exit_code == 0 and "Usage:" in result.stdout, result.stderr


def test_a_bad_option_value_is_one_line_and_exit_2() -> None:
    assert_one_line_error(mtkit("serve", "run", "--port", "99999"), "--port 99999", "not a TCP port")
    assert_one_line_error(mtkit("serve", "run", "--engine", "onnx"), "--engine onnx")
    assert_one_line_error(mtkit("export", "run", "--to", "onnx", "--out", "x"), "--to onnx")


def test_a_value_of_the_wrong_type_is_a_usage_error_without_traceback() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "mtkit", "serve", "run", "--port", "eighty"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 2 and "--port" in run.stderr and "Traceback" not in run.stderr


def test_translate_names_a_missing_input_before_loading_any_model(tmp_path: Path) -> None:
    missing = tmp_path / "missing.en"
    run = subprocess.run(
        [*MTKIT_WITHOUT_TORCH, "translate", "no-run", "--input", str(missing)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and run.stderr.strip() == f"error: {missing}: no such file", run.stderr


def test_translate_checks_the_prefix_file_against_the_input(tmp_path: Path) -> None:
    (tmp_path / "in.en").write_text("a\nb\n")
    (tmp_path / "prefix.de").write_text("x\n")
    result = mtkit(
        "translate", "no-run", "--input", str(tmp_path / "in.en"), "--prefix-file", str(tmp_path / "prefix.de")
    )
    assert_one_line_error(result, "prefix.de: 1 lines", "in.en 2")


def test_average_of_a_directory_without_checkpoints(tmp_path: Path) -> None:
    assert_one_line_error(mtkit("average", str(tmp_path)), "no checkpoints to average")


def test_score_prints_bleu_of_two_small_files(tmp_path: Path) -> None:
    hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
    hyp.write_text("Ein Mann schläft auf der Bank .\nZwei Hunde spielen im Schnee .\n", encoding="utf-8")
    ref.write_text("Ein Mann schläft auf einer Bank .\nZwei Hunde spielen im Schnee .\n", encoding="utf-8")
    result = mtkit("score", str(hyp), "--ref", str(ref))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("BLEU = ") and "signature: " in result.stdout and "chrF2 = " in result.stdout
    same = json.loads(mtkit("score", "--ref", str(ref), "--json", stdin=ref.read_text(encoding="utf-8")).stdout)
    assert same["bleu"] == 100.0
    assert_one_line_error(mtkit("score", str(hyp), "--ref", str(tmp_path / "none.de")), "none.de")


def fake(module: str, name: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Replace `module.name` by a recorder of its calls; the command imports it when it runs."""
    calls: list[tuple] = []
    monkeypatch.setattr(importlib.import_module(module), name, lambda *a, **k: calls.append((a, k)))
    return calls


def test_translate_leaves_search_options_to_the_recipe_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("signal.signal", lambda *args: None)  # translate's SIGPIPE setting is for its own process
    monkeypatch.setattr("mtkit.cli.translate_command.start_up_without_gc", contextlib.nullcontext)  # and its gc.freeze
    calls = fake("mtkit.engines.factory", "load_translator", monkeypatch)  # the CLI imports it from there when it runs
    monkeypatch.setattr("mtkit.engines.streaming.translate_stream", lambda *a, **k: None)
    monkeypatch.setattr("mtkit.engines.plans.split_options", lambda *a, **k: None)  # it reads the translator
    assert mtkit("translate", "run").exit_code == 0
    ((args, kwargs),) = calls
    assert args == (Path("run"), EngineConfig(), SearchOverrides(**CLI_DEFAULTS)) and kwargs == {}  # all defaults
    assert mtkit("translate", "run", "--beam", "2", "--workers", "3", "--engine", "ctranslate2").exit_code == 0
    assert calls[1][0][1:] == (
        EngineConfig(engine="ctranslate2"),
        SearchOverrides(**CLI_DEFAULTS, beam=2, workers=3),
    )


def test_serve_builds_its_config_from_every_option(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake("mtkit.serve.server", "serve", monkeypatch)
    assert mtkit("serve", "run").exit_code == 0
    assert calls[0][0] == ([Path("run")], ServeConfig())
    assert mtkit("serve", "run", "--port", "9000", "--max-batch-tokens", "500", "--strict").exit_code == 0
    assert calls[1][0][1] == ServeConfig(port=9000, max_batch_tokens=500, strict=True)
    assert mtkit("serve", "run", "--engine", "ctranslate2", "--threads", "2").exit_code == 0
    assert calls[2][0][1] == ServeConfig(engine=EngineConfig(engine="ctranslate2", threads=2))


def test_train_dry_run_prints_the_recipe_with_the_options_given(tmp_path: Path) -> None:
    result = mtkit(
        "train",
        str(tmp_path),
        "--save-dir",
        str(tmp_path / "run"),
        "--arch",
        "tiny",
        "--max-steps",
        "7",
        "--max-time",
        "2.5",
        "--set",
        "translate.beam=3",
        "--dry-run",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    recipe = json.loads(result.stdout)
    assert (recipe["train"]["max_steps"], recipe["train"]["max_time_minutes"], recipe["translate"]["beam"]) == (
        7,
        2.5,
        3,
    )
    assert not (tmp_path / "run").exists()
