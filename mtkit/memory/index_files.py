"""A memory's index kept on disk, so a process opens it in milliseconds instead of building it: one folder per memory
id (a published memory never changes, so its id names one index for ever) holding each array of
mtkit.memory.matching.IndexArrays as a .npy opened with mmap_mode="r" and the sources and targets as raw UTF-8
opened with mmap, so only the pages a lookup touches are read. A folder is written whole under a temporary name and
renamed into place (and removed by being renamed aside first); one of another FORMAT or key_version (the protected
patterns changed), or damaged, reads as missing. Where the folders live is the store's business
(mtkit.serve.memory_state); this module only writes, opens and removes one.
"""

from __future__ import annotations

import json
import mmap
import os
import shutil
import time
import uuid
from dataclasses import fields
from pathlib import Path

import numpy as np

from mtkit.memory.matching import IndexArrays, MemoryIndex, key_version

FORMAT = (
    2  # raised whenever matching's keys, words or arrays change: an index of another format is rebuilt (2: fragments)
)
META = "index.json"
TEXTS = ("sources", "targets")  # raw UTF-8, mmapped; every other field of IndexArrays is a .npy
STALE_S = 3600.0  # a temporary folder this old was left by a killed writer: removed by the next save


def save_index(index: MemoryIndex, folder: Path) -> bool:
    """The index written as `folder`, atomically: built under a temporary name beside it, then renamed. False when
    `folder` already exists (another process saved the same memory first: its index is the same)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(folder.parent)
    temporary = folder.parent / f".tmp-{uuid.uuid4().hex}"
    temporary.mkdir()
    try:
        arrays = index.arrays
        for name in (field.name for field in fields(IndexArrays)):
            value = getattr(arrays, name)
            if name in TEXTS:
                (temporary / f"{name}.bin").write_bytes(bytes(value))
            else:
                np.save(temporary / f"{name}.npy", np.ascontiguousarray(value), allow_pickle=False)
        meta = {"format": FORMAT, "keys": key_version(), "memory_id": index.memory_id, "segments": len(index)}
        (temporary / META).write_text(json.dumps(meta), encoding="utf-8")
        for path in temporary.iterdir():  # on disk before the rename makes them visible
            with open(path, "rb") as written:
                os.fsync(written.fileno())
        try:
            os.rename(temporary, folder)
        except OSError:
            if not folder.is_dir():
                raise
            return False
        return True
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def open_index(folder: Path, memory_id: str, segments: int) -> MemoryIndex | None:
    """The index saved as `folder`, its arrays mapped, not read; None when it is missing, of another FORMAT, key
    version or memory, of another size, or damaged (the caller builds it again)."""
    try:
        meta = json.loads((folder / META).read_text(encoding="utf-8"))
        wanted = (FORMAT, key_version(), memory_id, segments)
        if (meta.get("format"), meta.get("keys"), meta.get("memory_id"), meta.get("segments")) != wanted:
            return None
        values: dict[str, object] = {}
        for name in (field.name for field in fields(IndexArrays)):
            if name in TEXTS:
                values[name] = _mapped(folder / f"{name}.bin")
            else:  # a plain ndarray view of the map: slicing a np.memmap costs more per lookup
                values[name] = np.asarray(np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False))
        arrays = IndexArrays(**values)  # type: ignore[arg-type]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    entries = segments + len(arrays.fragment_of)
    if len(arrays.source_offsets) != entries + 1 or len(arrays.target_offsets) != entries + 1:
        return None
    return MemoryIndex(memory_id=memory_id, arrays=arrays)


def remove_index(folder: Path) -> None:
    """A memory's index gone (none there is fine): renamed aside first, so no process opens half of it."""
    aside = folder.parent / f".tmp-{uuid.uuid4().hex}"
    try:
        os.rename(folder, aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def _mapped(path: Path) -> bytes | mmap.mmap:
    with open(path, "rb") as stream:
        size = os.fstat(stream.fileno()).st_size
        return mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) if size else b""  # an empty one cannot be


def _remove_stale(root: Path) -> None:
    """Temporary folders of writers killed before their rename."""
    for path in root.glob(".tmp-*"):
        try:
            if time.time() - path.stat().st_mtime > STALE_S:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue
