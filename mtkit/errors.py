"""User-facing errors and the CLI's exit-code scheme.

A `UserError` is a mistake the user can fix (bad option, missing file, bad data); the CLI prints its
one-line message and exits with its code. Bugs are never wrapped: they keep their traceback.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_USER = 2
EXIT_LOCKED = 73
EXIT_IO = 74
EXIT_NUMERICAL = 75
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class UserError(Exception):
    """A mistake the user can act on; the message names the file, line or step."""

    exit_code = EXIT_USER


class LockedError(UserError):
    """The save directory is held by another live process."""

    exit_code = EXIT_LOCKED


class StorageError(UserError):
    """A write failed (disk full, permission, I/O error) or memory ran out."""

    exit_code = EXIT_IO


class NumericalError(UserError):
    """Training diverged: repeated non-finite losses."""

    exit_code = EXIT_NUMERICAL


class Interrupted(Exception):
    """SIGINT/SIGTERM arrived; raised after the current step was finished and saved."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signum}")
        self.exit_code = EXIT_SIGINT if signum == 2 else EXIT_SIGTERM


def check(condition: object, message: str, error: type[UserError] = UserError) -> None:
    """Raise `error(message)` unless `condition` holds."""
    if not condition:
        raise error(message)
