"""Checkpoints: atomic save with a content checksum, validated load, listing, pruning, float32 averaging.

Every payload is plain types and tensors, so `torch.load(weights_only=True)` reads it. This module
knows nothing of the model: it moves state dicts and config dicts.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from mtkit.errors import UserError, check
from mtkit.files import atomic_write

FORMAT = "mtkit-checkpoint"
VERSION = 1
CHECKPOINT_DIR = "checkpoints"
AVERAGE_NAME = "average.pt"
_STEP_FILE = re.compile(r"^step_(\d+)\.pt$")
# Temporary names of files.atomic_write for step checkpoints and average.pt (left behind by a kill -9).
_TEMP_FILE = re.compile(r"^\.(step_\d+\.pt|average\.pt)\..*\.tmp$")
# Fault injection for the reliability tests: the save fails with ENOSPC after this many bytes;
# or pauses this many milliseconds halfway through the write (so a kill lands inside a save).
FAULT_SAVE_BYTES = "MTKIT_FAULT_SAVE_FAIL_AFTER_BYTES"
FAULT_SAVE_DELAY = "MTKIT_FAULT_SAVE_DELAY_MS"


def _digest(value: Any, hasher: Any) -> None:
    """Feed a canonical walk of nested dicts/lists/tensors/plain values into `hasher`."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        hasher.update(f"T{tensor.dtype}{tuple(tensor.shape)}".encode())
        if tensor.numel():
            hasher.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, dict):
        hasher.update(b"{")
        for key in sorted(value, key=str):
            hasher.update(repr(key).encode())
            _digest(value[key], hasher)
        hasher.update(b"}")
    elif isinstance(value, (list, tuple)):
        hasher.update(b"[")
        for item in value:
            _digest(item, hasher)
        hasher.update(b"]")
    else:
        hasher.update(repr(value).encode())


def content_sha256(payload: dict) -> str:
    """Checksum of the checkpoint's content (every tensor byte and every plain value)."""
    hasher = hashlib.sha256()
    _digest(payload, hasher)
    return hasher.hexdigest()


def _write_bytes(handle: Any, data: bytes) -> None:
    limit = os.environ.get(FAULT_SAVE_BYTES)
    if limit is not None and len(data) > int(limit):
        handle.write(data[: int(limit)])
        handle.flush()
        raise OSError(errno.ENOSPC, "No space left on device (injected fault)")
    delay_ms = os.environ.get(FAULT_SAVE_DELAY)
    if delay_ms is not None:
        handle.write(data[: len(data) // 2])
        handle.flush()
        time.sleep(int(delay_ms) / 1000)
        data = data[len(data) // 2 :]
    handle.write(data)


def save_checkpoint(path: str | Path, payload: dict) -> None:
    """Atomically write `payload` plus its checksum; a failed write leaves the old file intact (exit 74)."""
    payload = {**payload, "format": FORMAT, "version": VERSION}
    buffer = io.BytesIO()
    torch.save({"payload": payload, "sha256": content_sha256(payload)}, buffer)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb") as handle:
        _write_bytes(handle, buffer.getvalue())


def load_checkpoint(path: str | Path) -> dict:
    """Load and verify a checkpoint; anything truncated, altered or foreign is a one-line UserError."""
    path = Path(path)
    check(path.is_file(), f"{path}: no such checkpoint")
    try:
        with warnings.catch_warnings():  # a damaged pickle can trigger torch warnings that only add noise
            warnings.simplefilter("ignore")
            outer = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for damaged zips; all mean "not loadable"
        raise UserError(f"{path}: corrupted or not an mtkit checkpoint ({type(exc).__name__})") from None
    ok = isinstance(outer, dict) and isinstance(outer.get("payload"), dict)
    check(ok and outer["payload"].get("format") == FORMAT, f"{path}: not an mtkit checkpoint")
    payload = outer["payload"]
    check(payload.get("version") == VERSION, f"{path}: checkpoint version {payload.get('version')} unsupported")
    check(content_sha256(payload) == outer.get("sha256"), f"{path}: checksum mismatch (the file is corrupted)")
    return payload


def step_path(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR / f"step_{step:08d}.pt"


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Step checkpoints of a run, oldest first."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _STEP_FILE.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_valid_checkpoint(run_dir: str | Path, warn: Any = None) -> tuple[Path, dict] | None:
    """Newest checkpoint that verifies; damaged newer ones are reported through `warn` and skipped."""
    for path in reversed(list_checkpoints(run_dir)):
        try:
            return path, load_checkpoint(path)
        except UserError as exc:
            if warn is not None:
                warn(f"skipping {exc}")
    return None


def remove_stale_temporaries(run_dir: str | Path) -> list[Path]:
    """Delete half-written checkpoint/average files that a killed process left; call with the run's lock held."""
    run_dir = Path(run_dir)
    found = [p for folder in (run_dir, run_dir / CHECKPOINT_DIR) if folder.is_dir() for p in folder.iterdir()]
    stale = [p for p in found if _TEMP_FILE.match(p.name) and p.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def prune_checkpoints(run_dir: str | Path, keep_last: int, protect: Iterable[Path] = ()) -> list[Path]:
    """Delete all but the newest `keep_last` step checkpoints, never one in `protect`; returns the deleted."""
    protected = {Path(p).resolve() for p in protect}
    paths = list_checkpoints(run_dir)
    doomed = [p for p in paths[: max(0, len(paths) - keep_last)] if p.resolve() not in protected]
    for path in doomed:
        path.unlink(missing_ok=True)
    return doomed


def average_state_dicts(state_dicts: list[dict[str, torch.Tensor]], names: list[str]) -> dict[str, torch.Tensor]:
    """Parameter mean, accumulated in float32 and divided once; keys must be identical."""
    check(len(state_dicts) > 0, "nothing to average")
    keys = list(state_dicts[0])
    total = {k: state_dicts[0][k].detach().to(torch.float32).clone() for k in keys}
    for state, name in zip(state_dicts[1:], names[1:]):
        check(list(state) == keys, f"{name}: parameter names differ from {names[0]}; cannot average")
        for key in keys:
            check(state[key].shape == total[key].shape, f"{name}: {key} has shape {tuple(state[key].shape)}")
            total[key] += state[key].to(torch.float32)
    count = float(len(state_dicts))
    return {k: (total[k] / count).to(state_dicts[0][k].dtype) for k in keys}


def average_checkpoints(paths: list[Path]) -> dict:
    """A model-only payload whose parameters are the mean of `paths`; configs come from the newest."""
    payloads = [load_checkpoint(p) for p in paths]
    newest = payloads[-1]
    for payload, path in zip(payloads, paths):
        check(payload["configs"]["model"] == newest["configs"]["model"], f"{path}: architecture differs from {paths[-1]}")
    model = average_state_dicts([p["model"] for p in payloads], [str(p) for p in paths])
    keep = ("configs", "spm_model", "spm_sha256", "manifest")
    return {
        "kind": "average",
        "model": model,
        "step": newest["step"],
        "averaged_steps": [int(p["step"]) for p in payloads],
        **{k: newest[k] for k in keep if k in newest},
    }


def write_average(run_dir: str | Path, last: int, out: str | Path | None = None) -> tuple[Path, list[Path]]:
    """Average the last `last` step checkpoints of a run into `out` (default RUN_DIR/average.pt)."""
    paths = list_checkpoints(run_dir)
    check(paths, f"{run_dir}: no checkpoints to average")
    check(last >= 1, "--last must be at least 1")
    chosen = paths[-last:]
    target = Path(out) if out is not None else Path(run_dir) / AVERAGE_NAME
    save_checkpoint(target, average_checkpoints(chosen))
    return target, chosen
