"""Process-level settings of the CLI: the oneDNN primitive cache cap before any work, the fast exit after it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mtkit.cli import cap_onednn_cache


def test_onednn_cache_is_capped_unless_the_user_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    cap_onednn_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "32"
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "500")
    cap_onednn_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "500"


FULL_DISK_STDOUT = (  # a stdout whose writes fail as on a full disk, once its buffer is flushed
    "import io\n"
    "class Full(io.RawIOBase):\n"
    "    def writable(self): return True\n"
    "    def write(self, b): raise OSError(28, 'No space left on device')\n"
    "sys.stdout = io.TextIOWrapper(io.BufferedWriter(Full()))\n"
)


def exit_now_process(code: str, setup: str = "") -> subprocess.CompletedProcess:
    """A process that buffers output, registers an atexit handler and leaves through exit_now(code)."""
    script = (
        "import atexit, sys\n"
        "from mtkit.cli import exit_now\n"
        f"{setup}"
        "atexit.register(lambda: print('atexit ran', file=sys.stderr))\n"
        "sys.stdout.write('x' * 1000)\n"  # under the buffer size: only the final flush writes it
        "print('error line', file=sys.stderr)\n"
        f"exit_now({code})\n"
    )
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)


@pytest.mark.parametrize("code, status", [("None", 0), ("0", 0), ("2", 2)])
def test_exit_now_keeps_what_a_normal_exit_guarantees(code: str, status: int) -> None:
    run = exit_now_process(code)
    assert run.returncode == status
    assert run.stdout == "x" * 1000  # flushed
    assert run.stderr == "error line\natexit ran\n"


def test_exit_now_reports_a_failed_flush_and_passes_messages_to_sys_exit() -> None:
    assert exit_now_process("0", setup=FULL_DISK_STDOUT).returncode == 120  # as Python's own exit does
    message = exit_now_process("'stopped'")
    assert message.returncode == 1 and message.stderr == "error line\nstopped\natexit ran\n"
