"""The named fault points the kill -9 and fault tests arm, from one variable: MTKIT_FAULTS="nan_steps=3,4;oom_steps=6"
(as etcd's gofail failpoints). It is parsed once per process, on first use; afterwards `armed(name)` is one dict
lookup, so the product's paths ask it freely and pay nothing when no point is armed. Arming is for tests only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from mtkit.errors import UserError, check

FAULTS_ENV = "MTKIT_FAULTS"

# The points, their values ("name=value", points apart by ";") and what arming them does.
NAN_STEPS = "nan_steps"  # "3,4": the loss is NaN at these update attempts (1-based, skipped ones counted)
OOM_STEPS = "oom_steps"  # "6": out of memory at these update attempts
KILL_RANK_AT = "kill_rank_at"  # "RANK:ATTEMPT": that rank SIGKILLs itself at that update attempt, once per run
BACKTRANSLATE_PAUSE_MS = "backtranslate_pause_ms"  # back-translate sleeps this long after each recorded chunk
SAVE_FAIL_AFTER_BYTES = "save_fail_after_bytes"  # a checkpoint save fails with ENOSPC after this many bytes
SAVE_DELAY_MS = "save_delay_ms"  # a checkpoint save pauses this long once its first 4 KiB are written
STALE_CHECKPOINT_RANK = "stale_checkpoint_rank"  # this rank reads the checkpoint before the one rank 0 chose
STATE_WRITE_PAUSE_MS = "state_write_pause_ms"  # serve's state store pauses this long inside a glossary's create
MEMORY_IMPORT_PAUSE_MS = "memory_import_pause_ms"  # a memory's import pauses this long after each batch it writes


def _attempts(raw: str) -> frozenset[int]:
    items = [item.strip() for item in raw.split(",") if item.strip()]
    check(all(item.isdigit() for item in items), f"update attempts like 3,4, not {raw!r}")
    return frozenset(int(item) for item in items)


def _count(raw: str) -> int:
    check(raw.strip().isdigit(), f"a whole number, not {raw!r}")
    return int(raw)


def _rank_at(raw: str) -> tuple[int, int]:
    rank, colon, attempt = raw.replace(" ", "").partition(":")
    check(colon and rank.isdigit() and attempt.isdigit(), f"RANK:ATTEMPT like 1:4, not {raw!r}")
    return int(rank), int(attempt)


# Each point's parser: what `armed` returns for it (None while it is not armed).
_VALUES: dict[str, Callable[[str], Any]] = {
    NAN_STEPS: _attempts,
    OOM_STEPS: _attempts,
    KILL_RANK_AT: _rank_at,
    BACKTRANSLATE_PAUSE_MS: _count,
    SAVE_FAIL_AFTER_BYTES: _count,
    SAVE_DELAY_MS: _count,
    STALE_CHECKPOINT_RANK: _count,
    STATE_WRITE_PAUSE_MS: _count,
    MEMORY_IMPORT_PAUSE_MS: _count,
}
POINTS = frozenset(_VALUES)

_armed: dict[str, Any] | None = None  # parsed from FAULTS_ENV on first use


def parse(spec: str) -> dict[str, Any]:
    """Point -> its parsed value, of a spec written as FAULTS_ENV is; an unknown name or a bad value is refused in
    one line."""
    table: dict[str, Any] = {}
    for item in filter(str.strip, spec.split(";")):
        name, equals, raw = (part.strip() for part in item.partition("="))
        check(equals, f"{FAULTS_ENV}: {item.strip()!r} is not name=value")
        check(
            name in POINTS, f"{FAULTS_ENV}: unknown fault point {name!r}; the known ones: {', '.join(sorted(POINTS))}"
        )
        check(name not in table, f"{FAULTS_ENV}: fault point {name!r} is armed twice")
        try:
            table[name] = _VALUES[name](raw)
        except UserError as error:
            raise UserError(f"{FAULTS_ENV}: {name} takes {error}") from None
    return table


def armed(name: str) -> Any:
    """The value `name` is armed with (see the points above), or None."""
    global _armed
    if _armed is None:
        _armed = parse(os.environ.get(FAULTS_ENV, ""))
    if name not in POINTS:
        raise KeyError(f"no fault point {name!r}")  # a bug: the product's paths name points by these constants
    return _armed.get(name)
