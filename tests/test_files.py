"""Line splitting on "\\n" only, UTF-8 errors with file:line, atomic writes and directories, the run lock."""

from __future__ import annotations

import gzip
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mtkit.errors import LockedError, UserError
from mtkit.files import (
    DirectoryLock,
    atomic_directory,
    count_lines,
    current_umask,
    read_lines,
    resolve_prefix,
    write_text,
)


def test_split_on_newline_only(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes("a\rb\nc\u2028d\u0085e\r\nlast".encode("utf-8"))
    assert list(read_lines(path)) == ["a\rb", "c\u2028d\u0085e", "last"]
    assert count_lines(path) == 3
    assert subprocess.run(["wc", "-l"], stdin=open(path, "rb"), capture_output=True, text=True).stdout.strip() == "2"


def test_gzip_and_prefix(tmp_path: Path) -> None:
    with gzip.open(tmp_path / "p.en.gz", "wb") as handle:
        handle.write(b"one\ntwo\n")
    assert resolve_prefix(tmp_path / "p", "en").name == "p.en.gz"
    assert list(read_lines(resolve_prefix(tmp_path / "p", "en"))) == ["one", "two"]
    with pytest.raises(UserError, match="p.de"):
        resolve_prefix(tmp_path / "p", "de")


def test_bad_utf8_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nbad \xff here\n")
    with pytest.raises(UserError, match=r"bad.txt:2: invalid UTF-8"):
        list(read_lines(path))
    assert list(read_lines(path, "replace"))[1] == "bad \ufffd here"


def test_atomic_directory_leaves_nothing_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "out"
    with pytest.raises(RuntimeError):
        with atomic_directory(target) as tmp:
            (tmp / "half").write_text("x")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    with atomic_directory(target) as tmp:
        write_text(tmp / "done", "ok")
    assert (target / "done").read_text() == "ok"


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_outputs_get_a_new_files_mode_under_the_umask(tmp_path: Path, umask: int) -> None:
    """As `cp` writes: a new file and directory get the mode `open` and `mkdir` give them under the umask (not
    mkstemp's 0600), a file written over keeps its mode."""
    old = os.umask(umask)
    try:
        assert current_umask() == umask
        (tmp_path / "plain").write_text("x")
        os.mkdir(tmp_path / "plain_dir")
        write_text(tmp_path / "out.txt", "translated\n")
        with atomic_directory(tmp_path / "out_dir") as tmp:
            write_text(tmp / "inside", "x")
    finally:
        os.umask(old)

    def mode(name: str) -> int:
        return stat.S_IMODE(os.stat(tmp_path / name).st_mode)

    assert mode("out.txt") == mode("plain") == 0o666 & ~umask
    assert mode("out_dir") == mode("plain_dir") == 0o777 & ~umask
    os.chmod(tmp_path / "out.txt", 0o640)
    write_text(tmp_path / "out.txt", "again\n")
    assert mode("out.txt") == 0o640


def test_lock_exclusive_and_released_on_death(tmp_path: Path) -> None:
    with DirectoryLock(tmp_path):
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                f"from mtkit.files import DirectoryLock; DirectoryLock({str(tmp_path)!r}).acquire()",
            ],
            capture_output=True,
            text=True,
        )
        assert child.returncode != 0 and "locked by pid" in child.stderr
    # a holder killed without cleanup: the kernel drops the flock, the next one takes it over
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import time; from mtkit.files import DirectoryLock; DirectoryLock({str(tmp_path)!r}).acquire(); "
            "print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(LockedError):
        DirectoryLock(tmp_path).acquire()
    holder.kill()
    holder.wait()
    lock = DirectoryLock(tmp_path)
    lock.acquire()
    lock.release()


def test_lock_without_flock_falls_back_to_a_lock_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import fcntl
    import socket

    def no_flock(fd: int, operation: int) -> None:
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    warnings: list[str] = []
    first = DirectoryLock(tmp_path, warn=warnings.append)
    first.acquire()
    assert len(warnings) == 1 and "has no flock (Function not implemented)" in warnings[0]
    held = tmp_path / ".lock.held"
    assert held.read_text() == f"pid {os.getpid()} on {socket.gethostname()}\n"
    with pytest.raises(LockedError, match=f"locked by pid {os.getpid()} on"):
        DirectoryLock(tmp_path).acquire()  # this process is alive: refused
    first.release()
    assert not held.exists()
    # A holder that died without releasing (kill -9) on this host is taken over; one from another host is not.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    held.write_text(f"pid {dead.stdout.strip()} on {socket.gethostname()}\n")
    DirectoryLock(tmp_path).acquire()
    held.write_text("pid 1 on some-other-node\n")
    with pytest.raises(LockedError, match="pid 1 on some-other-node .*remove it if that process is gone"):
        DirectoryLock(tmp_path).acquire()
