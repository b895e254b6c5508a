"""mtkit.cli.process: the oneDNN primitive cache cap before any work, the fast exit after it, the GC-free start-up."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

from mtkit.cli.process import cap_onednn_cache, start_up_without_gc, tune_allocator


def test_onednn_cache_is_capped_unless_the_user_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    cap_onednn_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "32"
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "500")
    cap_onednn_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "500"


def test_allocator_tuning_never_fails() -> None:
    tune_allocator()  # glibc here; elsewhere a no-op, never an error


def test_start_up_without_gc_freezes_what_it_made_and_collects_again_after() -> None:
    frozen = gc.get_freeze_count()
    try:
        with start_up_without_gc():
            assert not gc.isenabled()
            made = [[i] for i in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() >= frozen + len(made)
    finally:
        gc.unfreeze()  # the rest of the test session collects as usual


def test_start_up_without_gc_turns_collection_back_on_after_an_error() -> None:
    with pytest.raises(RuntimeError):
        with start_up_without_gc():
            raise RuntimeError("load failed")
    gc.unfreeze()
    assert gc.isenabled()


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
        "from mtkit.cli.process import exit_now\n"
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


def test_exit_now_waits_for_a_running_non_daemon_thread() -> None:
    """A thread a normal exit would wait for gets the normal exit: its output is not lost."""
    setup = (
        "import threading, time\n"
        "threading.Thread(target=lambda: (time.sleep(0.3), print('thread done', file=sys.stderr))).start()\n"
    )
    run = exit_now_process("0", setup=setup)
    assert run.returncode == 0 and "thread done" in run.stderr
