"""Injected non-finite loss and out-of-memory: the update is skipped and logged, the parameters and the
optimizer state are untouched by it, and the run completes its steps."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from mtkit.corpus.binarized import ParallelData, collate
from mtkit.model.transformer import ModelConfig, Transformer
from mtkit.runs.checkpoint import load_checkpoint
from mtkit.runs.checkpoint_files import list_checkpoints
from mtkit.training.config import TrainConfig
from mtkit.training.distributed import DistContext
from mtkit.training.loop import train
from mtkit.training.loss import LossModule
from mtkit.training.step import build_optimizer, train_step
from tests.reliability.common import differing_tensors, record
from tests.reliability.conftest import tiny_recipe


def test_skipped_updates_are_logged_and_the_run_completes(
    tmp_path: Path, small_data: Path, arm_faults: Callable[[str], None]
) -> None:
    arm_faults("nan_steps=3,4;oom_steps=6")
    summary = train(small_data, tmp_path / "run", tiny_recipe("train.max_steps=6"))
    assert summary is not None and summary["step"] == 6
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    skipped = [(r["attempt"], r["skipped"]) for r in records if "skipped" in r]
    assert skipped == [(3, "nonfinite"), (4, "nonfinite"), (6, "oom")]
    assert [r["step"] for r in records if "loss" in r] == [1, 2, 3, 4, 5, 6]  # one log line per real update
    assert load_checkpoint(list_checkpoints(tmp_path / "run")[-1])["state"]["attempts"] == 9
    record(
        "skipped_run",
        "NaN at attempts 3,4 and OOM at attempt 6: 3/3 skipped and logged in metrics.jsonl, run "
        "completed 6 updates in 9 attempts",
    )


def test_a_skipped_update_leaves_parameters_and_optimizer_untouched(
    small_data: Path, arm_faults: Callable[[str], None]
) -> None:
    torch.manual_seed(0)
    model = Transformer(ModelConfig.preset("tiny", vocab_size=1000))
    module = LossModule(model, 0.1, pad_id=0)
    cfg = TrainConfig(clip_norm=1.0)
    ctx = DistContext(rank=0, world_size=1, device=torch.device("cpu"))
    optimizer = build_optimizer(model, cfg, ctx.device)
    data = ParallelData.open(small_data, "train", "en", "de")
    batch = [collate(data, np.arange(8))]
    assert not train_step(
        module, optimizer, None, batch, ctx, 1e-3, clip_norm=cfg.clip_norm, attempt=1
    ).skipped  # Adam state exists now
    arm_faults("nan_steps=2;oom_steps=3")
    for attempt, kind in ((2, "nonfinite"), (3, "oom")):
        params = copy.deepcopy(model.state_dict())
        state = copy.deepcopy(optimizer.state_dict())
        result = train_step(module, optimizer, None, batch, ctx, 1e-3, clip_norm=cfg.clip_norm, attempt=attempt)
        assert result.skipped == kind
        assert not differing_tensors(model.state_dict(), params), kind
        assert not differing_tensors(optimizer.state_dict(), state), kind
        assert all(p.grad is None for p in model.parameters()), kind
    # The same comparison catches a real update.
    params = copy.deepcopy(model.state_dict())
    assert not train_step(module, optimizer, None, batch, ctx, 1e-3, clip_norm=cfg.clip_norm, attempt=4).skipped
    assert differing_tensors(model.state_dict(), params)
    record(
        "skipped_step",
        "train_step with injected NaN and OOM: 2/2 skipped, parameters, Adam state and gradients untouched",
    )
