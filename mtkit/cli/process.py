"""Process-wide tweaks the `mtkit` command applies around its work, each kept for a measured reason.

Stdlib only, imported by the CLI before any command runs: it must not import torch or any mtkit module.
The figures are those recorded in BENCHMARKS.md with the commit that introduced each tweak.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any


def tune_allocator() -> None:
    """Keep freed tensor memory in the heap instead of returning it to the OS after every step.

    glibc serves blocks above 128 KiB with mmap and unmaps them on free, so every training step page-faults its
    activations in again: a fifth of training's CPU time was system time (2026-11-21, c2979ba). A high mmap/trim
    threshold lets the next step reuse them. No-op where glibc is not the allocator.
    """
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def cap_onednn_cache() -> None:
    """Keep at most 32 oneDNN primitives (default 1,024) unless ONEDNN_PRIMITIVE_CACHE_CAPACITY is set.

    Every batch shape gets its own primitives, and batch shapes rarely repeat, so a large cache mostly holds
    memory: 300 bf16 CPU training updates peaked at 4,305 MB RSS with the default and at 2,650 MB with 32, at the
    same speed and losses (2026-11-21, 916356e; BENCHMARKS.md). oneDNN reads the variable when it first creates a
    primitive, so this runs before any command.
    """
    import os

    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "32")


@contextlib.contextmanager
def start_up_without_gc() -> Iterator[None]:
    """Import torch and load a model without Python's cyclic garbage collector, then freeze what was made.

    Importing torch creates ~170,000 long-lived objects, and the collector scans them all in each of the ~3 full
    collections the growth triggers: 0.13-0.15 s of translate's 1.2 s start-up (gc.callbacks timing), for nothing
    to free. Frozen, they are never scanned again; collection resumes for what comes after. A 1-line translate
    as a whole process: 1.290 -> 1.105 s, median of 10 alternating pairs (2026-11-23, b9721d3).
    """
    import gc

    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def exit_now(code: Any) -> None:
    """sys.exit(code) without tearing down the interpreter's modules, which takes 0.4 s once torch is loaded
    (a 1-line translate as a whole process: 2.24 -> 1.81 s over 6 pairs, 2026-11-21, 061dd44; every command
    pays it).

    What a normal exit guarantees is kept: atexit handlers run (multiprocessing's among them) and stdout and
    stderr are flushed; a failed flush (disk full) exits 120 as Python does. Other non-daemon threads still
    running (a normal exit waits for them), or anything else unusual, get the normal exit. Daemon threads die
    either way (translate's reader may still be blocked on an open stdin).
    """
    import atexit
    import os
    import threading

    waited_for = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if not isinstance(code, (int, type(None))) or waited_for:
        sys.exit(code)
    try:
        atexit._run_exitfuncs()  # the one way to run the handlers without the teardown that follows them
    except Exception:  # noqa: BLE001 - already printed; a normal exit ignores it too
        pass
    status = code or 0
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # ValueError: already closed
            status = status or 120
    os._exit(status)
