"""Text and file primitives: plain/.gz reading, strict UTF-8 with file:line errors, atomic writes.

Lines are split on "\\n" only (never on "\\r", U+0085 or U+2028), so line counts equal `wc -l`;
a trailing "\\r" (CRLF) is removed and a missing final newline is fine. Writes go through a
temporary name, fsync and rename, so a crash never leaves a half-written file under the final name, and with the
mode `cp` gives: a new file's under the umask, or the mode of the file it replaces.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import io
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from mtkit.errors import StorageError, UserError, check

BAD_UTF8_MODES = ("error", "replace")


def open_binary(path: str | Path) -> BinaryIO:
    """Open a plain or gzip file for reading bytes; a missing file is a UserError naming it."""
    path = Path(path)
    check(path.is_file(), f"{path}: no such file")
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def decode_line(raw: bytes, path: str | Path, lineno: int, on_bad_utf8: str = "error") -> str:
    """Decode one raw line (without its "\\n"); a trailing "\\r" is dropped (CRLF files)."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if on_bad_utf8 == "replace":
            return raw.decode("utf-8", errors="replace")
        raise UserError(
            f"{path}:{lineno}: invalid UTF-8 at byte {exc.start} (use --on-bad-utf8 replace to substitute U+FFFD)"
        ) from None


def read_lines(path: str | Path, on_bad_utf8: str = "error") -> Iterator[str]:
    """Yield the lines of a plain or .gz text file, streaming, split on "\\n" only."""
    check(on_bad_utf8 in BAD_UTF8_MODES, f"--on-bad-utf8 must be one of {BAD_UTF8_MODES}")
    with open_binary(path) as handle:
        try:
            for lineno, raw in enumerate(handle, start=1):
                yield decode_line(raw.rstrip(b"\n"), path, lineno, on_bad_utf8)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise UserError(f"{path}: cannot read ({exc})") from None


def read_stream_lines(stream: BinaryIO, name: str = "<stdin>") -> Iterator[str]:
    """Yield lines from a binary stream, split on "\\n" only; invalid UTF-8 is replaced."""
    for lineno, raw in enumerate(stream, start=1):
        yield decode_line(raw.rstrip(b"\n"), name, lineno, "replace")


def count_lines(path: str | Path) -> int:
    """Number of lines, as `wc -l` counts them plus a final line without newline."""
    count = 0
    last = b"\n"
    with open_binary(path) as handle:
        try:
            for block in iter(lambda: handle.read(1 << 20), b""):
                count += block.count(b"\n")
                last = block[-1:]
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise UserError(f"{path}: cannot read ({exc})") from None
    return count + (last != b"\n")


def file_identity(path: str | Path) -> str:
    """Its resolved path, size and modification time: tells a file from itself rewritten, without reading it."""
    path = Path(path)
    stat = path.stat()
    return f"{path.resolve()} {stat.st_size} {stat.st_mtime_ns}"


def resolve_prefix(prefix: str | Path, lang: str) -> Path:
    """PREFIX.lang or PREFIX.lang.gz, whichever exists; a UserError naming both otherwise."""
    plain = Path(f"{prefix}.{lang}")
    gz = Path(f"{prefix}.{lang}.gz")
    if plain.is_file():
        return plain
    if gz.is_file():
        return gz
    raise UserError(f"{plain}: no such file (nor {gz})")


def fsync_dir(path: str | Path) -> None:
    """Make a rename inside `path` durable."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "wb") -> Iterator[io.IOBase]:
    """Write to a temporary file beside `path`, fsync, then rename over it.

    On any error the temporary file is removed and the previous file (if any) is untouched;
    OS errors (disk full, permission) become a StorageError (exit 74) naming the file.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _replaced_mode(path, 0o666))  # mkstemp's 0600 would make every output private
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        _remove_quietly(tmp)
        raise StorageError(f"{path}: write failed ({exc.strerror or exc}); previous file left intact") from None
    except BaseException:
        _remove_quietly(tmp)
        raise


def write_text(path: str | Path, text: str) -> None:
    """Atomically write a UTF-8 text file."""
    with atomic_write(path, "w") as handle:
        handle.write(text)


@contextlib.contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Build a directory under a temporary name and rename it to `path` only when complete.

    An interrupted or failed build removes the temporary directory, so nothing that looks
    complete is ever left behind. An existing `path` is replaced only after success.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent))
    try:
        os.chmod(tmp, _replaced_mode(path, 0o777))  # mkdtemp's 0700, as for atomic_write
        yield tmp
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def current_umask() -> int:
    """The process's umask, read from /proc where it can be (setting it to read it back races other threads)."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _replaced_mode(path: Path, full: int) -> int:
    """The permission bits `cp` gives `path`: those of the file it replaces, else `full` less the umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return full & ~current_umask()


def _remove_quietly(path: str | Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


# flock errors of file systems without it (some NFS and cluster mounts): the lock falls back to a lock file.
_NO_FLOCK = (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP)


class DirectoryLock:
    """An exclusive flock on DIR/.lock; the kernel drops it when the holder dies, so a stale lock is taken over.

    Where the file system has no flock, the lock is DIR/.lock.held created with O_CREAT|O_EXCL and holding
    "pid P on HOST", with a warning through `warn`; a stale one of a dead process on this host is taken over,
    one from another host is reported with the command to remove it. `name` and `subject` lock one set of files
    in a shared directory instead (DIR/NAME; "SUBJECT is locked by ...")."""

    def __init__(
        self,
        directory: str | Path,
        warn: Callable[[str], None] | None = None,
        name: str = ".lock",
        subject: str | None = None,
    ) -> None:
        self.path = Path(directory) / name
        self.held = Path(directory) / f"{name}.held"
        self.subject = subject or f"{directory}: save directory"
        self._warn = warn
        self._fd: int | None = None
        self._own_held = False

    def acquire(self) -> None:
        import fcntl

        from mtkit.errors import LockedError

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise LockedError(f"{self.subject} is locked by {holder}") from None
        except OSError as exc:
            os.close(fd)
            if exc.errno not in _NO_FLOCK:
                raise
            if self._warn is not None:
                self._warn(
                    f"{self.path.parent}: the file system has no flock ({exc.strerror}); locking with "
                    f"{self.held.name} instead (removed at exit; a crash elsewhere may leave it)"
                )
            self._acquire_held()
            return
        os.ftruncate(fd, 0)
        os.pwrite(fd, _holder_line().encode(), 0)
        self._fd = fd

    def _acquire_held(self) -> None:
        """Create the lock file exclusively; take over one whose process is gone from this host."""
        from mtkit.errors import LockedError

        for _ in range(2):
            try:
                fd = os.open(self.held, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                holder = self.held.read_text(encoding="utf-8", errors="replace").strip() or "another process"
                if not _dead_here(holder):
                    raise LockedError(
                        f"{self.subject} is locked by {holder} (lock file "
                        f"{self.held}; remove it if that process is gone)"
                    ) from None
                self.held.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(_holder_line())
            self._own_held = True
            return
        raise LockedError(f"{self.subject} is locked (lock file {self.held} keeps reappearing)")

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._own_held:
            self.held.unlink(missing_ok=True)
            self._own_held = False

    def __enter__(self) -> DirectoryLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder_line() -> str:
    import socket

    return f"pid {os.getpid()} on {socket.gethostname()}\n"


def _dead_here(holder: str) -> bool:
    """Whether a "pid P on HOST" line names a process of this host that no longer exists."""
    import socket

    parts = holder.split()
    if len(parts) != 4 or parts[0] != "pid" or not parts[1].isdigit() or parts[3] != socket.gethostname():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
