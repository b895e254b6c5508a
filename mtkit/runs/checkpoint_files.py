"""A run directory's checkpoint files, found and identified without torch.

mtkit.runs.checkpoint (torch) verifies and loads checkpoints; this module only names them and reads the checksum
trailer a checkpoint ends with, so a path that loads no checkpoint (CTranslate2 with a cached export) can tell
which checkpoint a run directory means, and whether it changed, without importing torch.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mtkit.errors import check
from mtkit.file_names import AVERAGE_NAME, CHECKPOINT_DIR

STEP_FILE = re.compile(r"^step_(\d+)\.pt$")
TRAILER = b"\nmtkit-sha256 "  # then the sha256 (hex) of every byte before it, and "\n"
TRAILER_SIZE = len(TRAILER) + 64 + 1


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Step checkpoints of a run (full and weights-only), oldest first."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := STEP_FILE.match(p.name))]
    return [p for _, p in sorted(found)]


def checkpoint_choices(path: str | Path, average: bool = True) -> list[Path]:
    """The checkpoints `path` may mean, first choice first: a file, itself alone; a run directory, its average.pt
    (when `average` and it has one), then its step checkpoints newest first. Reads none of them:
    mtkit.runs.checkpoint.find_checkpoint, the one answer to which checkpoint a run means, takes the first that
    verifies."""
    path = Path(path)
    if path.is_file():
        return [path]
    first = [path / AVERAGE_NAME] if average and (path / AVERAGE_NAME).is_file() else []
    return first + list(reversed(list_checkpoints(path)))


def checkpoint_candidate(path: str | Path) -> Path:
    """The checkpoint RUN_DIR means, unverified (find_checkpoint's first choice, without torch: the CTranslate2
    cache's key): average.pt, else the newest step checkpoint; a file as given."""
    path = Path(path)
    check(path.exists(), f"{path}: no such run directory or checkpoint")
    choices = checkpoint_choices(path)
    check(bool(choices), f"{path}: no checkpoint found (train first, or name a checkpoint file)")
    return choices[0]


def run_directory(path: str | Path) -> Path:
    """The run directory of RUN_DIR itself or of a checkpoint in it (RUN_DIR/checkpoints/step_*.pt, average.pt)."""
    path = Path(path)
    if path.is_dir():
        return path
    return path.parent.parent if path.parent.name == CHECKPOINT_DIR else path.parent


def trailer_digest(path: Path) -> str | None:
    """The sha256 a checkpoint's trailer records (not recomputed: one small read); None without a trailer."""
    size = path.stat().st_size
    if size < TRAILER_SIZE:
        return None
    with open(path, "rb") as handle:
        handle.seek(size - TRAILER_SIZE)
        tail = handle.read()
    if not (tail.startswith(TRAILER) and tail.endswith(b"\n")):
        return None
    return tail[len(TRAILER) : -1].decode("ascii", "replace")


def checkpoint_identity(path: str | Path) -> dict[str, Any]:
    """What tells one checkpoint file from another (or from itself rewritten): path, size, mtime, recorded sha256."""
    path = Path(path).resolve()
    stat = path.stat()
    return {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": trailer_digest(path)}
