"""Checkpoints: round trip under weights_only, corruption detected, atomic failure, pruning, averaging."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from mtkit.errors import StorageError, UserError
from mtkit.model.transformer import ModelConfig, Transformer
from mtkit.runs.checkpoint import (
    BackgroundSaver,
    HostSnapshot,
    average_checkpoints,
    find_checkpoint,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
    step_path,
    write_average,
)
from mtkit.runs.checkpoint_files import list_checkpoints


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


def test_failed_save_leaves_previous_intact(tmp_path: Path, arm_faults: Callable[[str], None]) -> None:
    path = tmp_path / "c.pt"
    save_checkpoint(path, payload(1, 1.0))
    before = path.read_bytes()
    arm_faults("save_fail_after_bytes=1000")
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
    found = find_checkpoint(tmp_path, average=False)
    assert found is not None and found[1]["step"] == 20  # type: ignore[index]
    deleted = prune_checkpoints(tmp_path, keep_last=1, protect=[step_path(tmp_path, 10)])
    assert deleted == [step_path(tmp_path, 20)]
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_00000010.pt", "step_00000030.pt"]


def old_average(paths: list[Path]) -> dict[str, torch.Tensor]:
    """The average as mtkit computed it before streaming: every checkpoint loaded whole, then one float32 sum per
    key."""
    states = [load_checkpoint(p)["model"] for p in paths]
    keys = list(states[0])
    total = {k: states[0][k].detach().to(torch.float32).clone() for k in keys}
    for state in states[1:]:
        for key in keys:
            total[key] += state[key].to(torch.float32)
    return {k: (total[k] / float(len(states))).to(states[0][k].dtype) for k in keys}


def tiny_model_checkpoints(folder: Path, count: int, dtype: torch.dtype = torch.float32) -> list[Path]:
    """`count` full checkpoints of a tied tiny Transformer with different weights and an Adam-sized optimizer state."""
    cfg = ModelConfig.preset("tiny", vocab_size=300)
    paths = []
    for step in range(1, count + 1):
        torch.manual_seed(step)
        model = Transformer(cfg).to(dtype)
        state = model.state_dict()
        moments = {
            i: {"exp_avg": torch.randn_like(p), "exp_avg_sq": torch.rand_like(p)}
            for i, p in enumerate(model.parameters())
        }
        paths.append(step_path(folder, step * 10))
        save_checkpoint(
            paths[-1],
            {**payload(step * 10), "model": state, "optimizer": {"state": moments}, "configs": {"model": cfg.__dict__}},
        )
    return paths


@pytest.mark.exactness
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_streamed_average_equals_old_average_and_keeps_ties(tmp_path: Path, dtype: torch.dtype) -> None:
    paths = tiny_model_checkpoints(tmp_path, 4, dtype)
    expected = old_average(paths)
    target, used = write_average(tmp_path, 3)
    assert used == paths[-3:]
    averaged = load_checkpoint(target)
    assert averaged["averaged_steps"] == [20, 30, 40] and averaged["step"] == 40 and "optimizer" not in averaged
    streamed, reference = averaged["model"], old_average(paths[-3:])
    assert list(streamed) == list(reference) and expected.keys() == reference.keys()
    for key in reference:
        assert streamed[key].dtype == dtype and torch.equal(streamed[key], reference[key]), key
    # Tied: the embedding and the output projection are one tensor in the file, and tied again in a model.
    tied = [k for k in streamed if k.endswith("tokens.weight")] + ["output.weight"]
    assert len({streamed[k].untyped_storage().data_ptr() for k in tied}) == 1
    model = Transformer(ModelConfig(**averaged["configs"]["model"])).to(dtype)
    model.load_state_dict(streamed)
    assert model.output.weight is model.decoder.embed.tokens.weight
    assert torch.equal(model.output.weight, reference["output.weight"])


def test_average_refuses_mismatched_checkpoints(tmp_path: Path) -> None:
    paths = tiny_model_checkpoints(tmp_path, 1)
    other = tmp_path / "other.pt"
    save_checkpoint(other, {**payload(99), "configs": load_checkpoint(paths[0])["configs"]})
    with pytest.raises(UserError, match="parameter names differ"):
        average_checkpoints([paths[0], other])


def test_prune_keeps_weights_only_files_for_the_average(tmp_path: Path) -> None:
    paths = tiny_model_checkpoints(tmp_path, 6)
    before = load_checkpoint(paths[2])["model"]
    deleted = prune_checkpoints(tmp_path, keep_last=2, protect=[paths[0]], keep_weights=4)
    assert deleted == [paths[1]]  # paths[0] protected; paths[2:4] in the averaging window
    kinds = [load_checkpoint(p)["kind"] for p in list_checkpoints(tmp_path)]
    assert kinds == ["train", "weights", "weights", "train", "train"]
    assert "optimizer" not in load_checkpoint(paths[2]) and paths[2].stat().st_size < paths[4].stat().st_size / 2
    after = load_checkpoint(paths[2])["model"]
    assert list(after) == list(before) and all(torch.equal(after[k], before[k]) for k in before)
    # Resume never picks a weights-only file, averaging reads both kinds.
    paths[5].write_bytes(b"damaged")
    paths[4].write_bytes(b"damaged")
    assert find_checkpoint(tmp_path, average=False, full_only=True)[0] == paths[0]  # type: ignore[index]
    assert find_checkpoint(tmp_path)[0] == paths[3]  # type: ignore[index]
    assert average_checkpoints(paths[2:4])["averaged_steps"] == [30, 40]


def test_snapshot_is_independent_and_keeps_views_shared() -> None:
    weight = torch.ones(3, 2)
    state = {"model": {"a": weight, "b": weight, "c": torch.zeros(2)}, "step": [torch.tensor(1.0)], "n": 5}
    copy = HostSnapshot().take(state)
    weight.add_(1.0)
    state["step"][0].add_(1.0)
    assert torch.equal(copy["model"]["a"], torch.ones(3, 2)) and copy["model"]["a"] is copy["model"]["b"]
    assert copy["step"][0].item() == 1.0 and copy["n"] == 5 and copy["model"]["c"] is not state["model"]["c"]


def test_background_saver_runs_one_job_at_a_time_and_reports_errors(
    tmp_path: Path, arm_faults: Callable[[str], None]
) -> None:
    saver, order = BackgroundSaver(), []
    saver.submit(lambda: (save_checkpoint(tmp_path / "a.pt", payload(1)), order.append("a")))
    saver.submit(lambda: order.append("b" if (tmp_path / "a.pt").is_file() else "b before a"))
    saver.wait()
    assert order == ["a", "b"]
    arm_faults("save_fail_after_bytes=10")
    saver.submit(lambda: save_checkpoint(tmp_path / "c.pt", payload(2)))
    with pytest.raises(StorageError, match="c.pt"):
        saver.wait()
    saver.wait()  # reported once
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pt"]
