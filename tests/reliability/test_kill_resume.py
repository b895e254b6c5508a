"""kill -9 at random points of a training run, then the same command again: it resumes from the newest
complete checkpoint, no checkpoint under its final name is ever corrupt, and the final parameters are
bit-identical to an uninterrupted run (float32 CPU, dropout on). A fine-tuning run (--init-from) killed and
resumed: tests/exports/test_huggingface.py::test_fine_tuning_resumes_exactly_after_kill9."""

from __future__ import annotations

import json
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
# there keep the suite within its time (each kill is a process start: 32 s of the first pass at 6 kills, Xeon).
KILLS = 2 if os.environ.get("ATEN_CPU_CAPABILITY") == "avx2" else 4
MAX_STEPS = 24  # > KILLS * (3 logged + 1 or 2 more) updates per killed process: every kill lands mid-run
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


DECAY_SETS = (
    "train.lr_schedule=wsd",
    "train.decay_fraction=0.5",
    "train.save_interval_steps=4",
    "train.average_last=4",
)


@pytest.mark.exactness
def test_kill9_during_the_decay_resumes_exactly(tmp_path: Path, small_data: Path) -> None:
    """wsd on a budget of 16 updates, its decay the last half (after the warm-up's 10: steps 11-16): killed at update
    15, inside the decay, the same command resumes from step 12 and ends with the weights, Adam moments and average
    of a run never stopped; the rates are the schedule's, and the average takes the decay's checkpoints only."""
    from mtkit.faults import FAULTS_ENV
    from mtkit.training.config import scheduled_lr, step_budget_plan

    recipe = tiny_recipe("train.max_steps=16", *DECAY_SETS)
    train(small_data, tmp_path / "reference", recipe)
    run = tmp_path / "killed"
    command = train_command(small_data, run, 16, *DECAY_SETS)
    killed = Trainer(command, env={FAULTS_ENV: "kill_rank_at=0:15"})
    assert killed.finish() == -9 and killed.steps[-1] == 14, killed.stderr[-3000:]
    assert newest_step(run) == 12
    resumed = Trainer(command)
    assert resumed.finish() == 0, resumed.stderr[-3000:]
    assert resumed.steps[0] == 13
    final, expected = (load_checkpoint(list_checkpoints(path)[-1]) for path in (run, tmp_path / "reference"))
    assert final["step"] == expected["step"] == 16
    assert not differing_tensors(final["model"], expected["model"])
    assert not differing_tensors(final["optimizer"], expected["optimizer"])
    averages = [load_checkpoint(path / "average.pt") for path in (run, tmp_path / "reference")]
    assert averages[0]["averaged_steps"] == averages[1]["averaged_steps"] == [12, 16]
    assert not differing_tensors(averages[0]["model"], averages[1]["model"])
    rates = [
        (r["step"], r["lr"]) for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "lr" in r
    ]
    plan = step_budget_plan(recipe.train)
    assert plan == (10, 16) and rates[-1] == (16, 0.0)
    assert rates == [(s, scheduled_lr(recipe.train, s, plan)) for s in range(1, 17)]
