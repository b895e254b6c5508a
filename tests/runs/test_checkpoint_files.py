"""A run's checkpoint files found and identified without torch (mtkit.runs.checkpoint_files): which file a run directory
means, the step order, the checksum trailer, and what tells one checkpoint from another."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mtkit.errors import UserError
from mtkit.file_names import AVERAGE_NAME, CHECKPOINT_DIR
from mtkit.runs.checkpoint_files import (
    TRAILER,
    checkpoint_candidate,
    checkpoint_identity,
    list_checkpoints,
    trailer_digest,
)


def with_trailer(path: Path, payload: bytes) -> Path:
    """A file laid out as mtkit writes a checkpoint: payload, then TRAILER, its sha256 in hex and a newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload + TRAILER + hashlib.sha256(payload).hexdigest().encode() + b"\n")
    return path


def test_step_checkpoints_are_listed_by_step_number_not_by_name(tmp_path: Path) -> None:
    assert list_checkpoints(tmp_path) == []  # no checkpoints/ folder yet
    folder = tmp_path / CHECKPOINT_DIR
    for name in (
        "step_00000100.pt",
        "step_9.pt",
        "step_00000020.pt",
        ".step_00000200.pt.tmp",
        "step_1.pt.bak",
        "notes.txt",
    ):
        with_trailer(folder / name, name.encode())
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_9.pt", "step_00000020.pt", "step_00000100.pt"]


def test_a_run_directory_means_its_average_else_its_newest_step(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such run directory or checkpoint"):
        checkpoint_candidate(tmp_path / "absent")
    with pytest.raises(UserError, match="no checkpoint found"):
        checkpoint_candidate(tmp_path)
    older, newer = (with_trailer(tmp_path / CHECKPOINT_DIR / f"step_{s:08d}.pt", b"x") for s in (50, 150))
    assert checkpoint_candidate(tmp_path) == newer
    average = with_trailer(tmp_path / AVERAGE_NAME, b"avg")
    assert checkpoint_candidate(tmp_path) == average
    assert checkpoint_candidate(older) == older  # a file is taken as given


def test_the_trailer_digest_is_read_not_recomputed(tmp_path: Path) -> None:
    payload = os.urandom(10_000)
    path = with_trailer(tmp_path / "a.pt", payload)
    assert trailer_digest(path) == hashlib.sha256(payload).hexdigest()
    forged = path.read_bytes()[:-65] + b"0" * 64 + b"\n"  # a wrong digest is reported as written: load checks it
    path.write_bytes(forged)
    assert trailer_digest(path) == "0" * 64
    for damaged in (payload, b"short", path.read_bytes()[:-1]):  # no trailer, too small, cut before its newline
        path.write_bytes(damaged)
        assert trailer_digest(path) is None


def test_the_identity_changes_when_the_file_is_rewritten(tmp_path: Path) -> None:
    path = with_trailer(tmp_path / "run" / AVERAGE_NAME, b"one")
    first = checkpoint_identity(tmp_path / "run" / ".." / "run" / AVERAGE_NAME)
    assert first == {
        "path": str(path.resolve()),
        "size": path.stat().st_size,
        "mtime_ns": path.stat().st_mtime_ns,
        "sha256": hashlib.sha256(b"one").hexdigest(),
    }
    assert checkpoint_identity(path) == first  # unchanged: the same identity
    with_trailer(path, b"two")  # same size, other content
    os.utime(path, ns=(first["mtime_ns"], first["mtime_ns"]))  # even with the old time kept
    assert checkpoint_identity(path)["sha256"] != first["sha256"]


def test_real_checkpoints_carry_the_trailer_and_runfiles_needs_no_torch(tiny_run: Path) -> None:
    """mtkit.runs.checkpoint writes the trailer runfiles reads; the module imports without torch."""
    from mtkit.runs.checkpoint_files import list_checkpoints as checkpoint_list

    assert list_checkpoints(tiny_run) == checkpoint_list(tiny_run) and len(list_checkpoints(tiny_run)) >= 2
    path = checkpoint_candidate(tiny_run)
    assert path == tiny_run / AVERAGE_NAME
    data = path.read_bytes()
    assert trailer_digest(path) == hashlib.sha256(data[: data.rindex(TRAILER)]).hexdigest()
    script = (
        "import sys; sys.modules['torch'] = None\n"
        "from mtkit.runs.checkpoint_files import checkpoint_candidate, checkpoint_identity\n"
        f"print(checkpoint_identity(checkpoint_candidate({str(tiny_run)!r}))['sha256'])"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == trailer_digest(path), done.stderr
