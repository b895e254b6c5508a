"""What the training loop keeps between updates, by name: the resumable TrainState, the log window's sums, the
stop votes every rank casts in the update's all-reduce, the signal flag, and the one fault a test may inject.

Below mtkit.training.loop; plain data and small helpers (torch only for the checkpoint payload and a gradient norm).
"""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from mtkit.faults import KILL_RANK_AT, armed
from mtkit.training.config import BUDGET_SCHEDULES, TrainConfig, time_budget_end, time_decay_due


@dataclass
class TrainState:
    """Where the run is; everything needed to continue exactly (plain types only)."""

    step: int = 0
    epoch: int = 1
    position: int = 0  # batches of this rank's shard consumed in the current epoch
    attempts: int = 0  # update attempts, skipped ones included (fault injection counts these)
    wall: float = 0.0  # training seconds before this process started
    best_loss: float = math.inf
    best_step: int = 0
    stale: int = 0  # validations since the best one
    # A budget schedule's decay under a time budget, decided once (mtkit.training.config.decide_decay) and kept, so
    # a resumed run goes on with it: the last update at the peak and the budget's last update; 0, 0: not decided.
    decay_start: int = 0
    decay_end: int = 0


@dataclass
class LogWindow:
    """Sums over the updates since the last log line."""

    loss_sum: float = 0.0  # loss * target tokens
    nll_sum: float = 0.0
    src_tokens: int = 0
    tgt_tokens: int = 0
    updates: int = 0
    started: float = field(default_factory=time.monotonic)

    def add(self, loss: float, nll: float, src_tokens: int, tgt_tokens: int) -> None:
        self.loss_sum += loss * tgt_tokens
        self.nll_sum += nll * tgt_tokens
        self.src_tokens += src_tokens
        self.tgt_tokens += tgt_tokens
        self.updates += 1

    def record(self, state: TrainState, lr: float, grad_norm: float) -> dict[str, Any]:
        """The metrics.jsonl record of this window (grad_norm: the last update's)."""
        seconds = max(time.monotonic() - self.started, 1e-9)
        tokens = max(self.tgt_tokens, 1)
        loss, nll = self.loss_sum / tokens, self.nll_sum / tokens
        return {
            "step": state.step,
            "epoch": state.epoch,
            "loss": round(loss, 4),
            "nll": round(nll, 4),
            "ppl": round(math.exp(min(nll, 50)), 3),
            "lr": lr,
            "src_tokens": int(self.src_tokens),
            "tgt_tokens": int(self.tgt_tokens),
            "tokens_per_s": round((self.src_tokens + self.tgt_tokens) / seconds, 1),
            "updates": int(self.updates),
            "grad_norm": round(grad_norm, 4),
        }


@dataclass
class StopVotes:
    """Why a rank would stop or save after this update. Cast as numbers in the update's one all-reduce, so after
    it every rank holds the sums and decides alike without a second collective per update."""

    signal: float = 0.0  # the signal number a rank received (0: none)
    time_up: float = 0.0  # train.max_time_minutes reached
    save_due: float = 0.0  # train.save_interval_minutes since the last save
    # A budget schedule under train.max_time_minutes: whether the remaining time starts the decay, and the update at
    # which this rank's clock says the time runs out (summed: the mean is budget_end / ranks; inf: not measured).
    decay_due: float = 0.0
    budget_end: float = 0.0

    def as_list(self) -> list[float]:
        return [self.signal, self.time_up, self.save_due, self.decay_due, self.budget_end]

    @classmethod
    def from_list(cls, summed: list[float]) -> StopVotes:
        return cls(*summed) if summed else cls()


@dataclass
class Pace:
    """This process's pace, measured from the end of its first update (which also pays for start-up: allocation,
    compilation, the first batches): training seconds and step there."""

    wall: float = 0.0
    step: int = 0  # 0: no update yet

    def mark(self, wall: float, step: int) -> None:
        if not self.step:
            self.wall, self.step = wall, step

    def decay_votes(self, cfg: TrainConfig, state: TrainState, wall: float) -> tuple[float, float]:
        """This rank's StopVotes.decay_due and budget_end before update state.step + 1, `wall` training seconds in:
        zeros but for a budget schedule under a time budget whose decay is not decided yet."""
        if cfg.lr_schedule not in BUDGET_SCHEDULES or not cfg.max_time_minutes or state.decay_end:
            return 0.0, 0.0
        if not self.step or state.step <= self.step:
            return 0.0, math.inf  # not measured yet: the decay waits for the next update
        per_update = max((wall - self.wall) / (state.step - self.step), 1e-9)
        end = time_budget_end(state.step, wall, per_update, cfg.max_time_minutes)
        return float(time_decay_due(cfg, state.step + 1, wall)), end


class SignalFlag:
    """SIGINT/SIGTERM set a flag; the loop finishes its step, saves, then raises Interrupted."""

    def __init__(self) -> None:
        self.signum = 0
        self._previous = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}

    def _handle(self, signum: int, frame: Any) -> None:
        self.signum = signum

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def fault_kill_attempt(rank: int, run_dir: Path) -> int | None:
    """The update attempt at which this rank is to die like a crashed node (the kill_rank_at fault point), read once
    at start-up; None when no fault is asked of this rank or it already happened in this run directory."""
    wanted = armed(KILL_RANK_AT)
    if wanted is None or wanted[0] != rank:
        return None
    attempt = wanted[1]
    return None if fault_marker(run_dir, rank, attempt).exists() else attempt


def fault_marker(run_dir: Path, rank: int, attempt: int) -> Path:
    return run_dir / f".fault-killed-rank{rank}-attempt{attempt}"


def kill_for_fault(run_dir: Path, rank: int, attempt: int) -> None:
    """SIGKILL this process, leaving the marker that makes the restarted rank run on."""
    fault_marker(run_dir, rank, attempt).touch()
    os.kill(os.getpid(), signal.SIGKILL)


def make_payload(
    model: nn.Module, optimizer: Any, scaler: Any, state: TrainState, rng: list[Tensor], extra: dict
) -> dict:
    return {
        "kind": "train",
        "model": model.state_dict(),  # on the device: Run.save copies it to the host, tied weights once
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict() if scaler is not None else {},
        "state": dict(state.__dict__),
        "step": state.step,
        "rng": rng,
        **extra,
    }


def gradient_norm(model: nn.Module, clipped: Tensor | None) -> float:
    """L2 norm of the last update's gradients before clipping: clipping's own figure, else computed from the
    gradients the update left (read on log steps only: it waits for the device)."""
    if clipped is not None:
        return float(clipped)
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))) if grads else 0.0
