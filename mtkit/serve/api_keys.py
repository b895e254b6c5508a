"""API keys for mtkit serve: the --api-keys file (one key per line, optionally its requests per minute) and the
check of each request against it (403 without a valid key, 429 over the key's limit in the last 60 s), counted in
this process (MemoryWindows) or in a store the replicas share.

Keys are secrets: no message here or in its callers ever contains one. Stdlib only; the clock is passed in.
"""

from __future__ import annotations

import collections
import logging
import re
import threading
from pathlib import Path
from typing import Protocol

from mtkit.errors import check
from mtkit.files import read_lines
from mtkit.serve.request import RequestError

API_KEY_IN_QUERY = re.compile(r"((?:^|[?&])api_key=)[^&\s]*")
WINDOW_S = 60.0  # limits are per minute, over a moving window (LibreTranslate's "N per minute")


def read_api_keys(path: str | Path) -> dict[str, int | None]:
    """KEY or KEY LIMIT per line (blank lines and # comments skipped); LIMIT: requests per minute, None: no limit."""
    keys: dict[str, int | None] = {}
    for number, line in enumerate(read_lines(path), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        where = f"{path}:{number}"
        check(len(fields) <= 2, f"{where}: expected KEY or KEY REQUESTS_PER_MINUTE, got {len(fields)} fields")
        check(fields[0] not in keys, f"{where}: this key is listed twice")
        limit = None
        if len(fields) == 2:
            check(
                fields[1].isdigit() and int(fields[1]) >= 1,
                f"{where}: the limit must be a whole number of requests per minute, at least 1",
            )
            limit = int(fields[1])
        keys[fields[0]] = limit
    check(bool(keys), f"{path}: no API key in the file")
    return keys


class Windows(Protocol):
    """Where each key's recent requests are counted: this process (MemoryWindows) or a store every replica shares
    (mtkit.serve.redis_state.RedisState)."""

    def hit(self, key: str, limit: int, window_s: float, now: float) -> bool: ...


class MemoryWindows:
    """Each key's requests of the last window in this process's memory: one server's default; thread-safe."""

    def __init__(self) -> None:
        self._recent: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
        self._lock = threading.Lock()

    def hit(self, key: str, limit: int, window_s: float, now: float) -> bool:
        """Count a request at `now` when the key has had fewer than `limit` in the window; False (uncounted) else."""
        with self._lock:
            recent = self._recent[key]
            while recent and recent[0] <= now - window_s:
                recent.popleft()
            if len(recent) >= limit:
                return False
            recent.append(now)
            return True


class KeyLimiter:
    """Admits a request when its key is known and under the key's limit, counted in `windows`."""

    def __init__(self, keys: dict[str, int | None], windows: Windows | None = None) -> None:
        self.keys = keys
        self.windows: Windows = windows or MemoryWindows()

    def admit(self, key: object, now: float) -> None:
        """Raises RequestError 403 (no key or an unknown one) or 429 (over its limit); else counts the request."""
        if not isinstance(key, str) or not key:
            raise RequestError(
                403, "Invalid API key: this server needs an api_key with every translate and detect request"
            )
        if key not in self.keys:
            raise RequestError(403, "Invalid API key")
        limit = self.keys[key]
        if limit is not None and not self.windows.hit(key, limit, WINDOW_S, now):
            raise RequestError(429, f"Slowdown: {limit} per 1 minute")


def load_limiter(path: str | Path | None) -> KeyLimiter | None:
    """The limiter of --api-keys FILE, or None when the server takes requests without keys."""
    return None if path is None else KeyLimiter(read_api_keys(path))


class HideKeys(logging.Filter):
    """Replaces the value of every api_key= in a log record's string arguments by <hidden>."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                API_KEY_IN_QUERY.sub(r"\1<hidden>", arg) if isinstance(arg, str) else arg for arg in record.args
            )
        return True


def hide_keys_in_access_log() -> None:
    """uvicorn's access log writes each request's path with its query, where some clients put api_key."""
    logging.getLogger("uvicorn.access").addFilter(HideKeys())
