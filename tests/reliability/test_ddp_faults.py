"""Two gloo ranks under torchrun, one killed with SIGKILL: with --max-restarts 1 the run resumes from its
last checkpoint and ends bit-identical to an uninterrupted run; without restarts it fails fast, naming
the rank. Two torchrun agents on this host as two nodes (c10d rendezvous on 127.0.0.1, one process each) train
what one agent with two processes trains, bit for bit."""

from __future__ import annotations

import re
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mtkit.faults import FAULTS_ENV
from mtkit.runs.checkpoint import load_checkpoint
from mtkit.runs.checkpoint_files import list_checkpoints
from tests.reliability.common import (
    BIN,
    audit_checkpoints,
    differing_tensors,
    record,
    run_bounded,
    temporaries,
    train_args,
)

MAX_STEPS = 6
SAVE_EVERY_STEP = "train.save_interval_steps=1"


def torchrun(
    data_dir: Path, run_dir: Path, restarts: int, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`torchrun --standalone` (a free port) of 2 CPU ranks training MAX_STEPS steps, a checkpoint each step."""
    launcher = [str(BIN / "torchrun"), "--standalone", "--nproc-per-node", "2", "--max-restarts", str(restarts)]
    launcher.append("--no-python")
    command = launcher + ["mtkit", *train_args(data_dir, run_dir, MAX_STEPS, SAVE_EVERY_STEP)]
    return run_bounded(command, 240, env)


def two_nodes(
    data_dir: Path, run_dir: Path, restarts: int, env: dict[str, str] | None = None
) -> list[subprocess.CompletedProcess]:
    """Two torchrun agents, as two nodes of one process each, meeting by c10d rendezvous on 127.0.0.1 (as
    docs/many-machines.md has them): each runs what `torchrun` above runs on one node."""
    with socket.socket() as sock:  # a free port for the rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    launcher = [str(BIN / "torchrun"), "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d"]
    launcher += ["--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "two-nodes", "--max-restarts", str(restarts)]
    command = launcher + ["--no-python", "mtkit", *train_args(data_dir, run_dir, MAX_STEPS, SAVE_EVERY_STEP)]
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda _: run_bounded(command, 240, env), range(2)))


def same_final_state(run: Path, reference: Path) -> None:
    final, expected = load_checkpoint(list_checkpoints(run)[-1]), load_checkpoint(list_checkpoints(reference)[-1])
    assert final["step"] == expected["step"] == MAX_STEPS
    assert not differing_tensors(final["model"], expected["model"])
    assert not differing_tensors(final["optimizer"], expected["optimizer"])


@pytest.mark.exactness
@pytest.mark.slow
def test_killed_rank_restarts_and_ends_identical(tmp_path: Path, small_data: Path) -> None:
    """One agent of two processes, rank 1 killed at its 4th update with --max-restarts 1, ends as the uninterrupted
    run."""
    reference = torchrun(small_data, tmp_path / "reference", restarts=0)
    assert reference.returncode == 0, reference.stderr[-3000:]
    run = tmp_path / "killed"
    killed = torchrun(small_data, run, restarts=1, env={FAULTS_ENV: "kill_rank_at=1:4"})
    assert killed.returncode == 0, killed.stderr[-4000:]
    assert (run / ".fault-killed-rank1-attempt4").exists() and re.search(r"exitcode: -9\) local_rank: 1", killed.stderr)
    assert killed.stdout.count("trained to step") == 1  # one summary, from rank 0
    same_final_state(run, tmp_path / "reference")
    assert audit_checkpoints(run)[1] == [] and temporaries(run) == []
    record(
        "ddp_restart",
        "2-rank gloo run, rank 1 SIGKILLed at update 4, --max-restarts 1: completed, final parameters "
        "and optimizer state bit-identical to an uninterrupted 2-rank run",
    )


@pytest.mark.slow
def test_two_nodes_train_as_one_node_of_two_ranks(tmp_path: Path, small_data: Path) -> None:
    """Two torchrun agents of one rank each, two nodes on this host, end bit for bit as one agent of two ranks.
    Not marked exactness, to keep the suite within its time: checked on the CPU's own kernels only, not again in the
    forced-AVX2 pass (docs/many-machines.md says so)."""
    reference = torchrun(small_data, tmp_path / "one-node", restarts=0)
    assert reference.returncode == 0, reference.stderr[-3000:]
    nodes = two_nodes(small_data, tmp_path / "two-nodes", restarts=0)
    assert all(node.returncode == 0 for node in nodes), "".join(node.stderr[-2000:] for node in nodes)
    assert sum(node.stdout.count("trained to step") for node in nodes) == 1  # one summary, from rank 0
    same_final_state(tmp_path / "two-nodes", tmp_path / "one-node")


@pytest.mark.slow
def test_killed_rank_without_restarts_fails_fast(tmp_path: Path, small_data: Path) -> None:
    start = time.monotonic()
    done = torchrun(small_data, tmp_path / "run", restarts=0, env={FAULTS_ENV: "kill_rank_at=1:3"})
    seconds = time.monotonic() - start
    assert done.returncode != 0 and seconds < 60, (done.returncode, seconds)
    assert re.search(r"rank\s*:\s*1 \(local_rank: 1\)", done.stderr) and "SIGKILL" in done.stderr, done.stderr[-3000:]
    assert audit_checkpoints(tmp_path / "run")[1] == []
    record(
        "ddp_no_restart",
        f"2-rank gloo run, rank 1 SIGKILLed, no restarts: torchrun exit {done.returncode} after "
        f"{seconds:.0f} s (limit 60) naming rank 1, 0 corrupt checkpoints",
    )
