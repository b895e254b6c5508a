"""The run directory: its layout, the compatibility check before resuming, and the metrics log.

RUN_DIR holds config.json (the resolved recipe), spm.model, manifest.json (the data it was trained
on), checkpoints/step_*.pt, average.pt and metrics.jsonl, so translate and average need nothing else.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from mtkit.console import log, warn
from mtkit.errors import UserError, check
from mtkit.faults import STALE_CHECKPOINT_RANK, armed
from mtkit.file_names import CONFIG_NAME, MANIFEST_NAME, METRICS_NAME, SPM_NAME
from mtkit.files import file_sha256, write_text
from mtkit.runs.checkpoint import find_checkpoint, load_checkpoint, model_options, remove_stale_temporaries
from mtkit.runs.checkpoint_files import list_checkpoints

# Manifest fields that identify the data; resuming on anything else is refused.
DATA_IDENTITY = ("source_lang", "target_lang", "vocab_size", "spm_sha256", "splits")
# Model fields that regularise rather than shape the parameters: a fine-tuning run may change them.
REGULARISATION_FIELDS = ("dropout", "attention_dropout", "activation_dropout")


def data_identity(manifest: dict) -> dict:
    """The manifest's DATA_IDENTITY fields, each split's drop counts of zero left out: a drop reason that preprocess
    learned later (a new filter, counted 0 when it drops nothing or is off) does not make the same data another."""
    identity = {key: manifest.get(key) for key in DATA_IDENTITY}
    if isinstance(identity["splits"], dict):
        identity["splits"] = {
            name: {**split, "dropped": {k: n for k, n in split.get("dropped", {}).items() if n}}
            for name, split in identity["splits"].items()
        }
    return identity


def check_compatible(run_dir: Path, recipe: dict, manifest: dict, payload: dict | None) -> None:
    """Refuse, before anything is written, a run directory trained with another model, vocabulary or data."""
    saved_manifest = run_dir / MANIFEST_NAME
    if saved_manifest.is_file():
        old = json.loads(saved_manifest.read_text(encoding="utf-8"))
        check(
            data_identity(old) == data_identity(manifest),
            f"{run_dir}: was trained on other data or another sentencepiece model than this DATA_DIR; "
            "use a new --save-dir",
        )
    if payload is None:
        return
    saved_model = model_options(payload["configs"]["model"])
    check(
        saved_model == model_options(recipe["model"]),
        f"{run_dir}: the checkpoint's architecture differs from the requested one "
        f"(checkpoint {_diff(saved_model, recipe['model'])}); use a new --save-dir",
    )
    check(
        payload.get("spm_sha256") == manifest.get("spm_sha256"),
        f"{run_dir}: the checkpoint's sentencepiece model differs from DATA_DIR's; use a new --save-dir",
    )


def _diff(old: dict, new: dict) -> str:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return ", ".join(f"{k}={old.get(k)!r} vs {new.get(k)!r}" for k in keys[:4])


def load_parent(source: Path, recipe: dict, manifest: dict, warn: Any = None) -> tuple[Path, dict]:
    """The checkpoint a fine-tuning run starts from (`train.init_from`): a run directory means its newest
    valid checkpoint, a file (a step checkpoint or average.pt) is taken as is. Refused in one line naming the
    difference when its sentencepiece model is not DATA_DIR's or its architecture is not the recipe's."""
    source = Path(source)
    if source.is_dir():
        found = find_checkpoint(source, warn=warn, average=False)
        check(found is not None, f"{source}: no valid checkpoint to initialize from")
        path, payload = found  # type: ignore[misc]
    else:
        check(source.is_file(), f"{source}: no such run directory or checkpoint to initialize from")
        path, payload = source, load_checkpoint(source)
    parent_spm, new_spm = payload.get("spm_sha256"), manifest.get("spm_sha256")
    check(
        parent_spm == new_spm,
        f"{path}: cannot initialize from it: sentencepiece model differs (spm_sha256 parent {str(parent_spm)[:12]}, "
        f"new {str(new_spm)[:12]}); preprocess the data with --spm-model PARENT_RUN/spm.model",
    )
    parent, new = model_options(payload["configs"]["model"]), model_options(recipe["model"])
    keys = sorted(k for k in set(parent) | set(new) if k not in REGULARISATION_FIELDS and parent.get(k) != new.get(k))
    check(
        not keys,
        f"{path}: cannot initialize from it: architecture differs ("
        + ", ".join(f"{k} parent {parent.get(k)!r}, new {new.get(k)!r}" for k in keys)
        + "); train with the parent's --arch or [model] settings",
    )
    return path, payload


def agreed_checkpoint(run_dir: Path, ctx: Any) -> tuple[Path, dict] | None:
    """The checkpoint to resume from (`ctx` a distributed.DistContext): rank 0 chooses the newest full one that
    verifies and every rank loads that file. Unless every rank then holds the step rank 0 chose, all stop with
    one line naming both: a node with a stale view of a shared file system would continue from other weights."""
    found = find_checkpoint(run_dir, warn=warn, average=False, full_only=True) if ctx.is_main else None
    choice = ctx.broadcast_object(None if found is None else (str(found[0]), int(found[1]["step"])))
    if choice is None:
        return None
    path, step = Path(choice[0]), choice[1]
    loaded: int | str = step
    if not ctx.is_main:
        try:
            found = path, load_checkpoint(_stale_view(path, ctx.rank))
            loaded = int(found[1]["step"])
        except UserError as exc:  # reported by every rank below, so none waits for the others in vain
            loaded = str(exc)
    seen = ctx.all_gather_object(loaded)
    wrong = [
        f"rank {rank} " + (f"loaded step {got}" if isinstance(got, int) else f"could not load it ({got})")
        for rank, got in enumerate(seen)
        if got != step
    ]
    check(
        not wrong,
        f"{path}: rank 0 chose step {step} to resume from, but {'; '.join(wrong)}: the ranks see "
        "different files (a stale cache of a shared file system?)",
    )
    return found


def _stale_view(path: Path, rank: int) -> Path:
    """`path`, or when the rank-agreement test arms stale_checkpoint_rank for this rank, the checkpoint listed before
    it: what a node whose file-system cache still shows an older file would read."""
    if armed(STALE_CHECKPOINT_RANK) != rank:
        return path
    older = [p for p in list_checkpoints(path.parent.parent) if p.name < path.name]
    return older[-1] if older else path


def open_run(
    run_dir: Path, data_dir: Path, recipe: dict, manifest: dict, is_main: bool, found: tuple[Path, dict] | None
) -> tuple[Path, dict] | None:
    """Validate and (on rank 0) populate RUN_DIR before resuming from `found` (agreed_checkpoint's); returns it."""
    check_compatible(run_dir, recipe, manifest, found[1] if found else None)
    if is_main:
        for path in remove_stale_temporaries(run_dir):  # saves a kill -9 interrupted; rank 0 holds the lock
            warn(f"removed the half-written {path.name} of an interrupted save")
        run_dir.mkdir(parents=True, exist_ok=True)
        write_text(run_dir / CONFIG_NAME, json.dumps(recipe, indent=2) + "\n")
        write_text(run_dir / MANIFEST_NAME, json.dumps(manifest, indent=2) + "\n")
        spm_target = run_dir / SPM_NAME
        if not spm_target.is_file() or file_sha256(spm_target) != manifest.get("spm_sha256"):
            shutil.copyfile(data_dir / SPM_NAME, spm_target)
    return found


class MetricsLog:
    """metrics.jsonl (one JSON object per log interval or validation) plus a console line; rank 0 only.

    Training that starts at step S (0, or the checkpoint it resumes) first drops the records after S: it
    redoes those updates, so the log reads as one history with each step once (a killed run logs past its
    last checkpoint). `monitor`, when given, gets every record written (monitor.TensorBoardLog plots them).
    """

    def __init__(
        self, run_dir: Path, enabled: bool, start_wall: float, start_step: int = 0, monitor: Any = None
    ) -> None:
        self.path = run_dir / METRICS_NAME
        self.enabled = enabled
        self.monitor = monitor
        self.start = time.monotonic() - start_wall
        if enabled and self.path.is_file():
            self._truncate_after(start_step)

    def _truncate_after(self, step: int) -> None:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        kept = []
        for line in lines:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by a kill: drop it
                continue
            if not isinstance(record, dict) or record.get("step", 0) <= step:
                kept.append(line)
        if len(kept) < len(lines):
            write_text(self.path, "".join(line + "\n" for line in kept))

    def wall(self) -> float:
        return time.monotonic() - self.start

    def write(self, record: dict[str, Any], line: str) -> None:
        if not self.enabled:
            return
        record = {"wall": round(self.wall(), 3), **record}
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        if self.monitor is not None:
            self.monitor(record)
        log(line)

    def close(self) -> None:
        if self.monitor is not None:
            self.monitor.close()
            self.monitor = None


def init_from_parent(model: Any, source: str, recipe: dict, manifest: dict, is_main: bool) -> None:
    """Load the parent's weights into a fresh run's model (every rank reads them, so all start alike)."""
    path, payload = load_parent(Path(source), recipe, manifest, warn if is_main else None)
    model.load_state_dict(payload["model"])
    if is_main:
        log(f"initialized from {path} (its step {payload['step']}); fresh optimizer, schedule and step count")
