"""A checkpoint write that fails (disk full at several byte offsets) or is killed halfway: exit 74 with a
one-line message, the older checkpoints intact, no half-written file left, and the next run resumes."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mtkit.errors import StorageError
from mtkit.faults import FAULTS_ENV
from mtkit.runs.checkpoint import load_checkpoint, step_path
from mtkit.runs.checkpoint_files import list_checkpoints
from mtkit.training.loop import train
from tests.reliability.common import (
    Trainer,
    audit_checkpoints,
    differing_tensors,
    kill9,
    record,
    run_cli,
    temporaries,
    train_args,
    train_command,
)
from tests.reliability.conftest import tiny_recipe


def recipe(max_steps: int):
    return tiny_recipe(f"train.max_steps={max_steps}", "train.save_interval_steps=2")


def snapshot(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in list_checkpoints(run_dir)}


def test_disk_full_during_save(tmp_path: Path, small_data: Path, arm_faults: Callable[[str], None]) -> None:
    run = tmp_path / "run"
    train(small_data, run, recipe(4))
    before = snapshot(run)
    size = step_path(run, 4).stat().st_size
    offsets = [0, 100, 10_000, size // 2]
    for offset in offsets:
        arm_faults(f"save_fail_after_bytes={offset}")
        with pytest.raises(StorageError) as failure:
            train(small_data, run, recipe(8))  # resumes at 4; the save of step 6 fails
        message = str(failure.value)
        assert "step_00000006.pt" in message and "No space left on device" in message and "\n" not in message
        assert snapshot(run) == before, offset
        assert temporaries(run) == [], offset
    arm_faults("")

    # The same failure through the CLI: exit 74, one line, no traceback, nothing half-written.
    failed = run_cli(
        *train_args(small_data, run, 8, "train.save_interval_steps=2"), env={FAULTS_ENV: "save_fail_after_bytes=100"}
    )
    assert failed.returncode == 74, failed.stderr[-2000:]
    assert "error:" in failed.stderr and "step_00000006.pt: write failed" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert snapshot(run) == before and temporaries(run) == []

    summary = train(small_data, run, recipe(8))
    assert summary["step"] == 8
    train(small_data, tmp_path / "straight", recipe(8))
    resumed = load_checkpoint(step_path(run, 8))["model"]
    assert not differing_tensors(resumed, load_checkpoint(step_path(tmp_path / "straight", 8))["model"])
    record(
        "disk_full_save",
        f"{len(offsets) + 1}/{len(offsets) + 1} failed saves (ENOSPC after 0, 100, 10000, "
        f"{size // 2} bytes; the CLI one exits 74) -> StorageError naming the file, 0 corrupt, 0 temporary files; "
        "resumed to identical parameters",
    )


def test_kill9_inside_a_save(tmp_path: Path, small_data: Path) -> None:
    run = tmp_path / "run"
    train(small_data, run, recipe(2))
    # The save of step 4 writes half the file, then waits 5 s: the kill lands inside the write.
    trainer = Trainer(
        train_command(small_data, run, 4, "train.save_interval_steps=2"), env={FAULTS_ENV: "save_delay_ms=5000"}
    )
    assert trainer.wait_steps(2), trainer.stderr[-3000:]
    half_written = []
    while not half_written and trainer.proc.poll() is None:
        time.sleep(0.01)
        half_written = temporaries(run)
    assert half_written, trainer.stderr[-3000:]
    assert kill9(trainer) == -9
    assert half_written[0].exists() and not step_path(run, 4).exists()
    assert audit_checkpoints(run) == (1, [])

    resumed = Trainer(train_command(small_data, run, 4, "train.save_interval_steps=2"))
    assert resumed.finish() == 0, resumed.stderr[-3000:]
    assert resumed.steps[0] == 3 and "removed the half-written" in resumed.stderr
    assert temporaries(run) == [] and audit_checkpoints(run) == (2, [])
    record(
        "kill9_in_save", "kill -9 inside a checkpoint write: 0 corrupt, temporary removed on resume, resumed at step 3"
    )
