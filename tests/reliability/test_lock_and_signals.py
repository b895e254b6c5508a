"""One trainer per run directory (a second exits 73 naming the holder's pid); SIGTERM and SIGINT finish
the current update, save, exit 143 / 130, and the next run continues where it stopped."""

from __future__ import annotations

import signal
from pathlib import Path

from mtkit.runs.checkpoint import load_checkpoint
from mtkit.runs.checkpoint_files import list_checkpoints
from mtkit.training.loop import train
from tests.reliability.common import (
    Trainer,
    audit_checkpoints,
    differing_tensors,
    newest_step,
    record,
    run_cli,
    train_args,
    train_command,
)
from tests.reliability.conftest import tiny_recipe

ENDLESS = 1_000_000  # max_steps of the runs that only a signal stops (no periodic saves either)


def stop_with(trainer: Trainer, signum: int, run: Path) -> tuple[int, int]:
    """Signal a trainer after its second logged update; returns (exit code, step saved)."""
    assert trainer.wait_steps(2), trainer.stderr[-3000:]
    trainer.signal(signum)
    code = trainer.finish()
    return code, newest_step(run)


def test_second_trainer_exits_73_and_signals_save_and_stop(tmp_path: Path, small_data: Path) -> None:
    run = tmp_path / "run"
    holder = Trainer(train_command(small_data, run, ENDLESS))
    assert holder.wait_steps(1), holder.stderr[-3000:]
    names = sorted(p.name for p in run.rglob("*"))
    second = run_cli(*train_args(small_data, run, ENDLESS))
    assert second.returncode == 73, second.stderr[-3000:]
    assert f"locked by pid {holder.proc.pid}" in second.stderr and "Traceback" not in second.stderr
    assert sorted(p.name for p in run.rglob("*")) == names  # the refused trainer wrote nothing

    code, saved = stop_with(holder, signal.SIGTERM, run)
    assert code == 143 and "stopped: interrupted by signal 15; checkpoint saved" in holder.stderr, holder.stderr[-2000:]
    assert saved == holder.steps[-1]  # the last update logged, the one in flight included, was saved
    interrupted = Trainer(train_command(small_data, run, ENDLESS))
    code, saved_again = stop_with(interrupted, signal.SIGINT, run)
    assert code == 130 and "interrupted by signal 2" in interrupted.stderr, interrupted.stderr[-2000:]
    assert interrupted.steps[0] == saved + 1 and saved_again == interrupted.steps[-1]

    final = Trainer(train_command(small_data, run, saved_again + 2))
    assert final.finish() == 0 and final.steps == [saved_again + 1, saved_again + 2], final.stderr[-2000:]
    # Stopped twice by signals, the run still equals one that never stopped.
    train(small_data, tmp_path / "straight", tiny_recipe(f"train.max_steps={saved_again + 2}"))
    a = load_checkpoint(list_checkpoints(run)[-1])["model"]
    b = load_checkpoint(list_checkpoints(tmp_path / "straight")[-1])["model"]
    assert not differing_tensors(a, b) and audit_checkpoints(run)[1] == []
    record(
        "lock_and_signals",
        f"second trainer on a held directory: exit 73 naming pid; SIGTERM -> 143 and SIGINT -> 130 "
        f"with the update in flight saved; resumed twice to step {saved_again + 2}, bit-identical to an unstopped run",
    )
