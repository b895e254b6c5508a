"""kill -9 at random points of a training run, then the same command again: it resumes from the newest
complete checkpoint, no checkpoint under its final name is ever corrupt, and the final parameters are
bit-identical to an uninterrupted run (float32 CPU, dropout on). A fine-tuning run (--init-from) killed and
resumed: tests/huggingface/test_convert.py::test_fine_tuning_resumes_exactly_after_kill9."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from mtkit.runs.checkpoint import load_checkpoint
from mtkit.runs.checkpoint_files import list_checkpoints
from mtkit.training.loop import train
from tests.reliability.common import (
    Trainer,
    audit_checkpoints,
    differing_tensors,
    kill9,
    newest_step,
    record,
    temporaries,
    train_command,
)
from tests.reliability.conftest import tiny_recipe

# The forced-AVX2 pass (Makefile: ATEN_CPU_CAPABILITY=avx2) checks the claim again on other kernels; half the kills
# there keep the suite within its time (each kill is a process start).
KILLS = 3 if os.environ.get("ATEN_CPU_CAPABILITY") == "avx2" else 6
MAX_STEPS = 36  # > KILLS * (3 logged + 1 or 2 more) updates per killed process: every kill lands mid-run
SAVE_EVERY_STEP = ("train.save_interval_steps=1",)


@pytest.mark.exactness
def test_kill9_at_random_points_resumes_exactly(tmp_path: Path, small_data: Path) -> None:
    rng = random.Random(8)
    # In-process reference: the same recipe as the CLI's, one thread, so the same arithmetic.
    train(small_data, tmp_path / "reference", tiny_recipe(f"train.max_steps={MAX_STEPS}", *SAVE_EVERY_STEP))

    run = tmp_path / "killed"
    resumed, inside_write, corrupt, files_checked = 0, 0, [], 0
    for kill in range(KILLS + 1):
        start = newest_step(run)
        trainer = Trainer(train_command(small_data, run, MAX_STEPS, *SAVE_EVERY_STEP))
        if kill < KILLS:
            # After 2-3 logged updates, then a random part of the last update's duration: inside the save
            # that follows a log line, between saves, or mid-update.
            assert trainer.wait_steps(rng.randint(2, 3)), trainer.stderr[-3000:]
            time.sleep(rng.uniform(0.0, trainer.step_times[-1] - trainer.step_times[-2]))
            assert kill9(trainer) == -9
        else:
            assert trainer.finish() == 0, trainer.stderr[-3000:]
        assert trainer.steps and trainer.steps[0] == start + 1, (start, trainer.steps[:3], trainer.stderr[-2000:])
        resumed += kill > 0 and start > 0  # continued from a checkpoint the killed process had saved
        inside_write += bool(temporaries(run))
        count, bad = audit_checkpoints(run)
        files_checked += count
        corrupt += bad

    assert resumed == KILLS and not corrupt, corrupt
    final = load_checkpoint(list_checkpoints(run)[-1])
    expected = load_checkpoint(list_checkpoints(tmp_path / "reference")[-1])
    assert final["step"] == expected["step"] == MAX_STEPS
    assert not differing_tensors(final["model"], expected["model"])
    assert not differing_tensors(final["optimizer"], expected["optimizer"])
    # The resume removed what the kills left half-written; everything under checkpoints/ loads.
    assert temporaries(run) == []
    for path in sorted((run / "checkpoints").iterdir()):
        load_checkpoint(path)
    load_checkpoint(run / "average.pt")
    record(
        "kill9_resume",
        f"{resumed}/{KILLS} resumed, {len(corrupt)} corrupt of {files_checked} checkpoint files checked after kills, "
        f"{inside_write} kills inside a checkpoint write, final parameters bit-identical",
        kills=KILLS,
        resumed=resumed,
        corrupt=len(corrupt),
        inside_write=inside_write,
        identical=True,
    )
