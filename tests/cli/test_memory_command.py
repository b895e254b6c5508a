"""`mtkit memory import|list|export|delete` on a state file, Multi30k's train pairs as TMX: imported, listed,
exported and read back the same, deleted; a kill -9 in the middle of an import leaves no memory, and the next
import of the same file is whole; a bad file or name is one line and exit 2."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mtkit.memory.tmx import TmxReader, write_tmx
from tests.conftest import ROOT, read_gz_lines, run_mtkit_in_process


@pytest.fixture(scope="module")
def train_tmx(multi30k: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Multi30k's 29,000 train pairs, en-de, as TMX 1.4b."""
    path = tmp_path_factory.mktemp("memory") / "train.tmx"
    pairs = zip(read_gz_lines(multi30k / "train.en.gz"), read_gz_lines(multi30k / "train.de.gz"))
    with open(path, "wb") as out:
        write_tmx(iter(pairs), out, "en", "de")
    return path


def listed(state: Path) -> list[dict]:
    run = run_mtkit_in_process("memory", "list", "--json", "--state", state)
    assert run.returncode == 0, run.stdout
    return json.loads(run.stdout)["memories"]


def test_import_list_export_delete(train_tmx: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.sqlite3"
    run = run_mtkit_in_process("memory", "import", train_tmx, "--name", "m30k", "--state", state, "--json")
    assert run.returncode == 0, run.stdout
    imported = json.loads(run.stdout)
    assert (imported["segments"], imported["source_lang"], imported["target_lang"]) == (29000, "en", "de")
    assert [(m["name"], m["segments"]) for m in listed(state)] == [("m30k", 29000)]
    out = tmp_path / "out.tmx"
    assert run_mtkit_in_process("memory", "export", "m30k", out, "--state", state).returncode == 0
    with open(out, "rb") as exported, open(train_tmx, "rb") as original:
        assert list(TmxReader(exported, "out.tmx")) == list(TmxReader(original, "train.tmx"))
    assert run_mtkit_in_process("memory", "delete", "m30k", "--state", state).returncode == 0
    assert listed(state) == []
    gone = run_mtkit_in_process("memory", "delete", "m30k", "--state", state)
    assert gone.returncode == 2 and "no such memory" in gone.stdout + gone.stderr


def test_a_bad_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.tmx").write_bytes(b"<tmx><header srclang='en'/><body><tu>")
    run = run_mtkit_in_process("memory", "import", tmp_path / "bad.tmx", "--name", "x", "--state", tmp_path / "s")
    message = (run.stdout + run.stderr).strip()
    assert run.returncode == 2 and "bad.tmx: not well-formed XML" in message and len(message.splitlines()) == 1


def test_a_kill_during_an_import_leaves_no_memory(train_tmx: Path, tmp_path: Path) -> None:
    """The import pauses 3 s after each batch of 10,000 segments: killed after its first, nothing is listed, and
    the file imported again is whole."""
    state = tmp_path / "state.sqlite3"
    env = os.environ | {"MTKIT_FAULTS": "memory_import_pause_ms=3000"}
    command = [sys.executable, "-m", "mtkit", "memory", "import", str(train_tmx), "--name", "m", "--state", str(state)]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    written = 0
    while time.monotonic() < deadline and not written:
        time.sleep(0.1)
        if state.exists():
            with sqlite3.connect(state, timeout=30) as db:
                try:
                    written = db.execute("SELECT count(*) FROM memory_segments").fetchone()[0]
                except sqlite3.OperationalError:  # the table not made yet
                    written = 0
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert written == 10_000
    assert listed(state) == []
    run = run_mtkit_in_process("memory", "import", train_tmx, "--name", "m", "--state", state)
    assert run.returncode == 0, run.stdout
    assert [(m["name"], m["segments"]) for m in listed(state)] == [("m", 29000)]
