"""Fixtures of the reliability tests: one small trained run shared by the checkpoint and translate tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtkit.recipe import resolve_recipe
from mtkit.training.loop import train
from tests.reliability.common import TRAIN_SETS


def tiny_recipe(*overrides: str):
    """The recipe of common.TRAIN_ARGS, for in-process runs."""
    return resolve_recipe(None, "tiny", TRAIN_SETS + list(overrides), vocab_size=1000)


@pytest.fixture(scope="session")
def reliability_run(tmp_path_factory: pytest.TempPathFactory, small_data: Path) -> Path:
    """A tiny model trained 4 steps (checkpoints at 2 and 4, average.pt of both)."""
    run_dir = tmp_path_factory.mktemp("reliability") / "run"
    train(small_data, run_dir, tiny_recipe("train.max_steps=4", "train.save_interval_steps=2", "train.average_last=2"))
    return run_dir
