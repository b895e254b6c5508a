"""Checkpoints: atomic save with a checksum, validated load, listing, pruning, streamed float32 averaging, and
the snapshot + background writer that keep saving off the training thread.

A file is `torch.save({"payload": ...})` followed by a trailer holding the sha256 of every byte before it: the
hash is computed as the bytes are written and checked by one streaming read, so neither needs the payload
twice in memory. Every payload is plain types and tensors (`torch.load(weights_only=True)` reads it). This
module knows nothing of the model: it moves state dicts and config dicts.
"""

from __future__ import annotations

import errno
import hashlib
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from mtkit.console import warn as console_warn
from mtkit.errors import UserError, check
from mtkit.faults import SAVE_DELAY_MS, SAVE_FAIL_AFTER_BYTES, armed
from mtkit.file_names import AVERAGE_NAME, CHECKPOINT_DIR
from mtkit.files import atomic_write

# Names of a run's checkpoint files and their trailer: mtkit.runs.checkpoint_files, which reads them without torch.
from mtkit.runs.checkpoint_files import (
    STEP_FILE,
    checkpoint_candidate,
    checkpoint_choices,
    list_checkpoints,
    trailer_digest,
)
from mtkit.runs.checkpoint_files import TRAILER as _TRAILER
from mtkit.runs.checkpoint_files import TRAILER_SIZE as _TRAILER_SIZE

FORMAT = "mtkit-checkpoint"
VERSION = 2  # 1: the checksum was a canonical hash of the content, stored inside the pickle (still read)
TRAIN_KIND = "train"  # a full checkpoint: resume reads it
WEIGHTS_KIND = "weights"  # the model only: kept for averaging once it is too old to resume from
# Temporary names of files.atomic_write for step checkpoints and average.pt (left behind by a kill -9).
_TEMP_FILE = re.compile(r"^\.(step_\d+\.pt|average\.pt)\..*\.tmp$")
# What a model-only payload (average, weights-only checkpoint) keeps of a training checkpoint besides the weights.
_MODEL_FIELDS = ("configs", "spm_model", "spm_sha256", "manifest")
# Model options added after checkpoints existed, with their defaults (mtkit.model.transformer.ModelConfig's, checked by
# tests/model/test_transformer.py): a checkpoint written before an option existed was trained with its default.
ADDED_MODEL_DEFAULTS = {"activation": "relu", "output_bias": False, "decoder_start_id": None, "tgt_vocab_size": None}


def model_options(options: dict) -> dict:
    """A checkpoint's model options, with the default of each option added since it was written."""
    return {**ADDED_MODEL_DEFAULTS, **options}


def _digest(value: Any, hasher: Any) -> None:
    """Feed a canonical walk of nested dicts/lists/tensors/plain values into `hasher` (version 1 files)."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        hasher.update(f"T{tensor.dtype}{tuple(tensor.shape)}".encode())
        if tensor.numel():
            hasher.update(tensor.reshape(-1).view(torch.uint8).numpy())
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
    """Checksum of a version 1 checkpoint's content (every tensor byte and every plain value)."""
    hasher = hashlib.sha256()
    _digest(payload, hasher)
    return hasher.hexdigest()


def checksum_trailer(hex_digest: str) -> bytes:
    """What follows the torch.save bytes of a checkpoint: their sha256."""
    return _TRAILER + hex_digest.encode("ascii") + b"\n"


class _HashingWriter:
    """The file object torch.save writes into: each chunk goes to the file and into sha256, nothing is buffered.
    The first OSError is kept in `error`: torch's zip writer replaces it by a RuntimeError of its own."""

    def __init__(self, handle: Any) -> None:
        self.handle, self.hasher, self.written = handle, hashlib.sha256(), 0
        self.error: OSError | None = None
        # The reliability tests' faults: a full disk, or a pause that lets a kill land inside the save.
        self.limit: int | None = armed(SAVE_FAIL_AFTER_BYTES)
        self.delay_ms: int | None = armed(SAVE_DELAY_MS)

    def write(self, data: Any) -> int:
        if self.error is not None:
            raise self.error
        try:
            return self._write(memoryview(data).cast("B"))
        except OSError as exc:
            self.error = exc
            raise

    def _write(self, view: memoryview) -> int:
        if self.limit is not None and self.written + len(view) > self.limit:
            self.handle.write(view[: self.limit - self.written])
            self.handle.flush()
            raise OSError(errno.ENOSPC, "No space left on device (injected fault)")
        self.hasher.update(view)
        self.handle.write(view)
        before, self.written = self.written, self.written + len(view)
        if self.delay_ms is not None and before < 4096 <= self.written:
            self.handle.flush()
            time.sleep(self.delay_ms / 1000)
        return len(view)

    def flush(self) -> None:
        self.handle.flush()


def save_checkpoint(path: str | Path, payload: dict) -> None:
    """Atomically write `payload` plus its checksum; a failed write leaves the old file intact (exit 74)."""
    payload = {**payload, "format": FORMAT, "version": VERSION}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb") as handle:
        writer = _HashingWriter(handle)
        try:
            torch.save({"payload": payload}, writer)
        except Exception:
            if writer.error is None:
                raise
        if writer.error is not None:
            raise writer.error
        handle.write(checksum_trailer(writer.hasher.hexdigest()))


def _trailer_check(path: Path) -> bool | None:
    """None when the file has no checksum trailer; else whether the bytes before it hash to it (one read pass,
    through the page cache: nothing of the file stays in this process's memory)."""
    recorded = trailer_digest(path)
    if recorded is None:
        return None
    hasher, left = hashlib.sha256(), path.stat().st_size - _TRAILER_SIZE
    with open(path, "rb") as handle:
        chunk = memoryview(bytearray(1 << 22))
        while left > 0:
            got = handle.readinto(chunk[: min(left, len(chunk))])
            if not got:
                return False
            hasher.update(chunk[:got])
            left -= got
    return hasher.hexdigest() == recorded


def load_checkpoint(path: str | Path, mmap: bool = False) -> dict:
    """Load and verify a checkpoint; anything truncated, altered or foreign is a one-line UserError.

    With `mmap`, tensors are mapped from the file and read only when touched: averaging takes the weights of a
    full checkpoint without ever reading its optimizer state into memory (version 2 files)."""
    path = Path(path)
    check(path.is_file(), f"{path}: no such checkpoint")
    trailer_ok = _trailer_check(path)
    check(trailer_ok is not False, f"{path}: checksum mismatch (the file is corrupted)")
    try:
        with warnings.catch_warnings():  # a damaged pickle can trigger torch warnings that only add noise
            warnings.simplefilter("ignore")
            outer = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap and trailer_ok is True)
    except Exception as exc:  # torch raises many types for damaged zips; all mean "not loadable"
        raise UserError(f"{path}: corrupted or not an mtkit checkpoint ({type(exc).__name__})") from None
    ok = isinstance(outer, dict) and isinstance(outer.get("payload"), dict)
    check(ok and outer["payload"].get("format") == FORMAT, f"{path}: not an mtkit checkpoint")
    payload = outer["payload"]
    version = payload.get("version")
    check(version in (1, VERSION), f"{path}: checkpoint version {version} unsupported")
    check((version == 1) == (trailer_ok is None), f"{path}: checksum missing (the file is corrupted)")
    if version == 1:
        check(content_sha256(payload) == outer.get("sha256"), f"{path}: checksum mismatch (the file is corrupted)")
    return payload


def step_path(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR / f"step_{step:08d}.pt"


def find_checkpoint(
    path: str | Path, warn: Any = None, average: bool = True, full_only: bool = False
) -> tuple[Path, dict | None] | None:
    """Which checkpoint `path` means, for every reader of a run: a checkpoint file, itself; a run directory, its
    average.pt when `average` and it has one, else its newest step checkpoint that verifies (with `full_only`, that
    training can resume from), damaged newer ones reported through `warn` and skipped. The order of the choices is
    checkpoint_files.checkpoint_choices (which reads no checkpoint, without torch).

    Returns the checkpoint with the payload it verified by, None for a file or an average.pt (its reader loads and
    verifies it); None when the run has none. A model's reader uses resolve_checkpoint, training goes on from
    `average=False, full_only=True` (runs.directory.agreed_checkpoint) and fine-tunes from `average=False`.
    """
    choices = checkpoint_choices(path, average)
    if choices and (Path(path).is_file() or choices[0].name == AVERAGE_NAME):
        return choices[0], None
    for choice in choices:
        try:
            payload = load_checkpoint(choice)
        except UserError as exc:
            if warn is not None:
                warn(f"skipping {exc}")
            continue
        if not full_only or payload.get("kind", TRAIN_KIND) == TRAIN_KIND:
            return choice, payload
    return None


def resolve_checkpoint(path: str | Path) -> Path:
    """The checkpoint a model is read from (find_checkpoint): RUN_DIR's averaged model, else its newest valid
    checkpoint (past damaged ones, with a warning); a file is used as given. Refused in one line when there is none."""
    checkpoint_candidate(path)  # refuses a missing path or a run without checkpoints
    found = find_checkpoint(path, warn=console_warn)
    check(found is not None, f"{path}: no checkpoint found (train first, or name a checkpoint file)")
    return found[0]  # type: ignore[index]


def remove_stale_temporaries(run_dir: str | Path) -> list[Path]:
    """Delete half-written checkpoint/average files that a killed process left; call with the run's lock held."""
    run_dir = Path(run_dir)
    found = [p for folder in (run_dir, run_dir / CHECKPOINT_DIR) if folder.is_dir() for p in folder.iterdir()]
    stale = [p for p in found if _TEMP_FILE.match(p.name) and p.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def _kind(path: Path) -> str | None:
    """A checkpoint's kind from its pickle alone (tensors mapped, not read); None when unreadable."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)["payload"].get("kind")
    except Exception:  # noqa: BLE001 - a damaged file is left for load_checkpoint to report
        return None


def demote_to_weights(path: Path) -> bool:
    """Rewrite a verified full checkpoint as weights-only (atomically, same name); False when it does not verify."""
    try:
        payload = load_checkpoint(path, mmap=True)
    except UserError:
        return False
    slim = {
        "kind": WEIGHTS_KIND,
        "model": payload["model"],
        "step": payload["step"],
        **{k: payload[k] for k in _MODEL_FIELDS if k in payload},
    }
    save_checkpoint(path, slim)
    return True


def prune_checkpoints(
    run_dir: str | Path, keep_last: int, protect: Iterable[Path] = (), keep_weights: int = 0
) -> list[Path]:
    """Keep the newest `keep_last` step checkpoints whole; of the older ones, make those among the newest
    `keep_weights` weights-only (what averaging needs) and delete the rest; never touch one in `protect`.
    Returns the deleted."""
    protected = {Path(p).resolve() for p in protect}
    paths = list_checkpoints(run_dir)
    keep = max(keep_last, 1)
    window_start = len(paths) - max(keep_weights, keep)  # files from here on are averaged at the end
    older = [(i, p) for i, p in enumerate(paths[:-keep]) if p.resolve() not in protected]
    for _, path in [(i, p) for i, p in older if i >= window_start]:
        if _kind(path) == TRAIN_KIND:
            demote_to_weights(path)
    doomed = [p for i, p in older if i < window_start]
    for path in doomed:
        path.unlink(missing_ok=True)
    return doomed


def _alias_of(state: dict[str, torch.Tensor]) -> dict[str, str]:
    """Keys whose tensor is the same view as an earlier key's (tied weights) -> that earlier key."""
    first: dict[tuple, str] = {}
    alias = {}
    for key, tensor in state.items():
        view = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape), tensor.stride())
        if tensor.numel() and view in first:
            alias[key] = first[view]
        else:
            first.setdefault(view, key)
    return alias


def average_checkpoints(paths: list[Path]) -> dict:
    """A model-only payload whose parameters are the mean of `paths`; configs come from the newest.

    Streamed: one checkpoint is mapped at a time and only its weights are read, summed in float32 and divided
    once at the end (fairseq's average_checkpoints), so memory holds about two copies of the weights whatever
    the count. Tied weights are summed once and stay one tensor, so the average stores them once."""
    check(len(paths) > 0, "nothing to average")
    total: dict[str, torch.Tensor] = {}
    keys: list[str] = []
    alias: dict[str, str] = {}
    dtypes: dict[str, torch.dtype] = {}
    steps: list[int] = []
    first_model: dict = {}
    for path in paths:
        payload = load_checkpoint(path, mmap=True)
        state = payload["model"]
        if not keys:
            keys, alias, first_model = list(state), _alias_of(state), model_options(payload["configs"]["model"])
            dtypes = {k: state[k].dtype for k in keys}
            total = {k: state[k].detach().to(torch.float32, copy=True) for k in keys if k not in alias}
        else:
            check(
                model_options(payload["configs"]["model"]) == first_model,
                f"{path}: architecture differs from {paths[0]}",
            )
            check(list(state) == keys, f"{path}: parameter names differ from {paths[0]}; cannot average")
            for key, summed in total.items():
                check(state[key].shape == summed.shape, f"{path}: {key} has shape {tuple(state[key].shape)}")
                summed += state[key].to(torch.float32)
        steps.append(int(payload["step"]))
        newest = {k: payload[k] for k in _MODEL_FIELDS if k in payload}
        del payload, state  # unmaps this file before the next is opened
    model: dict[str, torch.Tensor] = {}
    for key in keys:  # divided in place and converted one tensor at a time: no second float32 copy
        model[key] = model[alias[key]] if key in alias else total.pop(key).div_(float(len(paths))).to(dtypes[key])
    return {"kind": "average", "model": model, "step": steps[-1], "averaged_steps": steps, **newest}


def write_average(
    run_dir: str | Path, last: int, out: str | Path | None = None, first_step: int = 0
) -> tuple[Path, list[Path]]:
    """Average the last `last` step checkpoints of a run into `out` (default RUN_DIR/average.pt), those of steps
    before `first_step` left out (the newest is always taken)."""
    paths = list_checkpoints(run_dir)
    check(paths, f"{run_dir}: no checkpoints to average")
    check(last >= 1, "--last must be at least 1")
    chosen = [p for p in paths[-last:] if int(STEP_FILE.match(p.name).group(1)) >= first_step] or paths[-1:]
    target = Path(out) if out is not None else Path(run_dir) / AVERAGE_NAME
    save_checkpoint(target, average_checkpoints(chosen))
    return target, chosen


class HostSnapshot:
    """Copies of nested dicts/lists of tensors in host memory, sharing nothing with the originals (training
    goes on changing those), so a background thread can write them.

    Tensors that are views of one another (tied embeddings) stay one tensor, so the file stores them once (a
    `.cpu()` per state-dict entry would copy a tied GPU embedding three times). The buffers are kept and
    reused by the next snapshot (pinned from a GPU, so the copies run without blocking): a copy into memory
    already mapped costs a fifth of a fresh clone's page faults (536 MB: 0.10 s against 0.55 s measured here).
    So take() must not be called again while a write of the previous snapshot is in flight (wait() first)."""

    def __init__(self) -> None:
        self._buffers: dict[tuple, torch.Tensor] = {}

    def release(self) -> None:
        """Drop the kept buffers (after the last save, before averaging needs the memory)."""
        self._buffers.clear()

    def take(self, value: Any) -> Any:
        memo: dict[tuple, torch.Tensor] = {}
        copied = self._copy(value, (), memo)
        if any(t.is_pinned() for t in memo.values()):
            torch.cuda.synchronize()  # the non-blocking copies have landed
        return copied

    def _copy(self, value: Any, where: tuple, memo: dict[tuple, torch.Tensor]) -> Any:
        if isinstance(value, dict):
            return {k: self._copy(v, (*where, k), memo) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self._copy(v, (*where, i), memo) for i, v in enumerate(value))
        if not isinstance(value, torch.Tensor):
            return value  # plain values are immutable or rebuilt by the caller each time
        tensor = value.detach()
        view = (
            tensor.device,
            tensor.untyped_storage().data_ptr(),
            tensor.storage_offset(),
            tuple(tensor.shape),
            tensor.stride(),
            tensor.dtype,
        )
        if view not in memo:
            memo[view] = self._host_copy(tensor, where)
        return memo[view]

    def _host_copy(self, tensor: torch.Tensor, where: tuple) -> torch.Tensor:
        cuda = tensor.device.type == "cuda"
        buffer = self._buffers.get(where)
        if buffer is None or buffer.shape != tensor.shape or buffer.dtype != tensor.dtype:
            buffer = self._buffers[where] = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=cuda)
        return buffer.copy_(tensor, non_blocking=cuda)


class BackgroundSaver:
    """Runs one save job at a time on a thread; the next submit and wait() block until it is done, and wait()
    raises what the job raised (a StorageError of a full disk surfaces at the next save or at the end)."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, job: Callable[[], None]) -> None:
        self.wait()
        self._thread = threading.Thread(target=self._run, args=(job,), name="mtkit-save", daemon=True)
        self._thread.start()

    def _run(self, job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:  # noqa: BLE001 - handed to the training thread by wait()
            self._error = exc

    def wait(self, raise_error: bool = True) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None and raise_error:
            raise error
