"""Checkpoints: round trip under weights_only, corruption detected, atomic failure, pruning, averaging."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mtkit.checkpoint import (
    FAULT_SAVE_BYTES,
    average_state_dicts,
    latest_valid_checkpoint,
    list_checkpoints,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
    step_path,
)
from mtkit.errors import StorageError, UserError


def payload(step: int, value: float = 1.0) -> dict:
    return {
        "kind": "train",
        "step": step,
        "model": {"w": torch.full((3, 4), value), "b": torch.arange(4, dtype=torch.bfloat16)},
        "rng": [torch.get_rng_state()],
        "state": {"epoch": 1, "best_loss": float("inf")},
        "configs": {"model": {"d_model": 8}, "train": {"adam_betas": (0.9, 0.98)}},
        "spm_model": b"\x00\x01spm",
    }


def test_round_trip_weights_only(tmp_path: Path) -> None:
    path = tmp_path / "c.pt"
    save_checkpoint(path, payload(3, 2.5))
    loaded = load_checkpoint(path)
    assert loaded["step"] == 3 and torch.equal(loaded["model"]["w"], torch.full((3, 4), 2.5))
    assert loaded["spm_model"] == b"\x00\x01spm"
    # loadable by plain torch.load(weights_only=True): no pickled numpy or custom classes
    assert torch.load(path, weights_only=True)["payload"]["step"] == 3


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "foreign"])
def test_damage_detected(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "c.pt"
    save_checkpoint(path, payload(1))
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        # flip a byte inside the tensor data (the checksum must catch it even if the zip does not)
        raw = bytearray(data)
        marker = torch.full((3, 4), 1.0).numpy().tobytes()
        at = bytes(raw).find(marker)
        assert at > 0
        raw[at + 5] ^= 0xFF
        path.write_bytes(bytes(raw))
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(UserError, match=str(path.name)):
        load_checkpoint(path)


def test_failed_save_leaves_previous_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.pt"
    save_checkpoint(path, payload(1, 1.0))
    before = path.read_bytes()
    monkeypatch.setenv(FAULT_SAVE_BYTES, "1000")
    with pytest.raises(StorageError, match="c.pt"):
        save_checkpoint(path, payload(2, 9.0))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # temporary file removed


def test_latest_valid_skips_damaged_and_prune_protects(tmp_path: Path) -> None:
    for step in (10, 20, 30):
        path = step_path(tmp_path, step)
        path.parent.mkdir(exist_ok=True)
        save_checkpoint(path, payload(step))
    step_path(tmp_path, 30).write_bytes(b"garbage")
    found = latest_valid_checkpoint(tmp_path)
    assert found is not None and found[1]["step"] == 20
    deleted = prune_checkpoints(tmp_path, keep_last=1, protect=[step_path(tmp_path, 10)])
    assert deleted == [step_path(tmp_path, 20)]
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_00000010.pt", "step_00000030.pt"]


def test_average_is_float32_mean() -> None:
    dicts = [{"w": torch.tensor([1.0, 2.0], dtype=torch.bfloat16)}, {"w": torch.tensor([2.0, 5.0], dtype=torch.bfloat16)}]
    avg = average_state_dicts(dicts, ["a", "b"])
    assert avg["w"].dtype == torch.bfloat16
    assert torch.equal(avg["w"], torch.tensor([1.5, 3.5], dtype=torch.bfloat16))
    with pytest.raises(UserError, match="names differ"):
        average_state_dicts([{"w": torch.zeros(1)}, {"v": torch.zeros(1)}], ["a", "b"])
