"""TensorBoard scalars: read back from the event files, they equal metrics.jsonl's records (a resumed run's
redone steps once); without the tensorboard package, a one-line hint before training starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mtkit.recipe import resolve_recipe
from mtkit.runs.checkpoint_files import list_checkpoints
from mtkit.training.loop import train
from mtkit.training.monitor import SCALARS


def read_scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series in `log_dir`'s event files as TensorBoard shows it (purged steps dropped)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_event_files_equal_metrics_jsonl_after_a_resume(tmp_path: Path, overfit_data: Path) -> None:
    pytest.importorskip("tensorboard")
    board, run = tmp_path / "board", tmp_path / "run"
    recipe = resolve_recipe(
        None,
        "tiny",
        [
            "train.max_steps=8",
            "train.log_interval=2",
            "train.save_interval_steps=4",
            "train.save_interval_minutes=0",
            "train.valid_interval_steps=4",
            "train.valid_bleu=True",
            "translate.beam=1",
            "translate.max_len_b=5",
            "train.max_tokens=1024",
            "train.warmup_steps=4",
            f"train.tensorboard_dir={str(board)!r}",
        ],
        vocab_size=1000,
    )
    train(overfit_data, run, recipe)
    first = read_scalars(board)
    # A run killed after logging step 8 but before saving it: the next run redoes steps 5-8 from step 4's checkpoint.
    list_checkpoints(run)[-1].unlink()
    train(overfit_data, run, recipe)

    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    scalars = read_scalars(board)
    assert set(scalars) == set(SCALARS.values())  # loss, nll, ppl, lr, tokens/s, grad norm, valid loss/ppl/BLEU
    for key, tag in SCALARS.items():
        expected = [(r["step"], r[key]) for r in records if key in r]
        assert [step for step, _ in scalars[tag]] == [step for step, _ in expected], tag
        assert [value for _, value in scalars[tag]] == pytest.approx([v for _, v in expected], rel=1e-6), tag
    assert [s for s, _ in scalars["train/loss"]] == [2, 4, 6, 8] and [s for s, _ in scalars["valid/bleu"]] == [4, 8]
    assert all(value > 0 for _, value in scalars["train/grad_norm"])
    # The first run's steps 5-8 were plotted too; the resumed run's values replaced them (tokens/s differs).
    assert first["train/tokens_per_s"][2:] != scalars["train/tokens_per_s"][2:]


def test_without_tensorboard_one_line_hint_before_training(tmp_path: Path, small_data: Path) -> None:
    """A `tensorboard` package that fails to import stands for one not installed."""
    shadow = tmp_path / "shadow" / "tensorboard"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no tensorboard here')\n")
    env = {**os.environ, "PYTHONPATH": f"{shadow.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mtkit",
            "train",
            str(small_data),
            "--save-dir",
            str(tmp_path / "run"),
            "--arch",
            "tiny",
            "--max-steps",
            "2",
            "--tensorboard",
            str(tmp_path / "board"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        "error: train.tensorboard_dir (--tensorboard) needs the tensorboard package: pip install -e '.[tensorboard]'"
    ]
    assert not (tmp_path / "run").exists() and not (tmp_path / "board").exists()


def test_several_language_pairs_plot_a_curve_each(tmp_path: Path) -> None:
    """valid_loss/en-de -> valid/loss/en-de beside the pooled valid/loss; other slashed keys are not plotted."""
    pytest.importorskip("tensorboard")
    from mtkit.training.monitor import TensorBoardLog

    board = TensorBoardLog(tmp_path, 0)
    board(
        {
            "step": 4,
            "valid_loss": 3.0,
            "valid_loss/en-de": 2.5,
            "valid_loss/en-fr": 3.5,
            "valid_bleu/en-fr": 7.0,
            "loss/en-de": 1.0,
        }
    )
    board.close()
    assert read_scalars(tmp_path) == {
        "valid/loss": [(4, 3.0)],
        "valid/loss/en-de": [(4, 2.5)],
        "valid/loss/en-fr": [(4, 3.5)],
        "valid/bleu/en-fr": [(4, 7.0)],
    }
