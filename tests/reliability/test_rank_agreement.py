"""Resuming under torchrun: rank 0 chooses the checkpoint and every rank loads that one. A rank that finds
another step in it (a stale file-system view, injected) stops the run on every rank with one line naming
both steps; without the fault both ranks continue from rank 0's choice."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mtkit.faults import FAULTS_ENV
from mtkit.runs.checkpoint_files import list_checkpoints
from mtkit.training.loop import train
from tests.reliability.common import BIN, STEP_LINE, record, run_bounded, train_args
from tests.reliability.conftest import tiny_recipe


def torchrun(
    data_dir: Path, run_dir: Path, max_steps: int, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    launcher = [str(BIN / "torchrun"), "--standalone", "--nproc-per-node", "2", "--max-restarts", "0", "--no-python"]
    command = launcher + ["mtkit", *train_args(data_dir, run_dir, max_steps, "train.save_interval_steps=2")]
    return run_bounded(command, 240, env)


@pytest.mark.slow
def test_ranks_resume_from_rank0s_checkpoint_or_stop(tmp_path: Path, small_data: Path) -> None:
    run = tmp_path / "run"
    train(small_data, run, tiny_recipe("train.max_steps=4", "train.save_interval_steps=2", "train.keep_last=2"))
    before = [p.name for p in list_checkpoints(run)]
    assert before == ["step_00000002.pt", "step_00000004.pt"]

    stale = torchrun(small_data, run, 6, env={FAULTS_ENV: "stale_checkpoint_rank=1"})
    assert stale.returncode != 0
    line = "rank 0 chose step 4 to resume from, but rank 1 loaded step 2: the ranks see different files"
    errors = [text for text in stale.stderr.splitlines() if line in text]
    assert len(errors) == 2 and all(text.startswith("error: ") for text in errors), stale.stderr[-3000:]
    assert [p.name for p in list_checkpoints(run)] == before  # nothing trained, nothing written

    agreed = torchrun(small_data, run, 6)
    assert agreed.returncode == 0, agreed.stderr[-3000:]
    steps = [int(m.group(1)) for text in agreed.stderr.splitlines() if (m := STEP_LINE.match(text))]
    assert steps == [5, 6] and agreed.stdout.count("trained to step 6") == 1
    record(
        "rank_agreement",
        "2-rank gloo resume where rank 1 reads an older checkpoint than rank 0 chose: both ranks "
        "stop with one line naming steps 4 and 2, nothing written; without the fault both resume at step 5",
    )
