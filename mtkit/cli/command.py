"""What every `mtkit` subcommand shares: a user's mistake as one stderr line and the exit code of mtkit.errors,
and results on stdout (JSON for scripts). Below the command modules (mtkit.cli.<command>_command), each one short
function per subcommand."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import typer

from mtkit.errors import EXIT_IO, EXIT_SIGINT, Interrupted, UserError


def user_errors(command: Callable) -> Callable:
    """Turn UserError/Interrupted/OS write errors into one stderr line and the documented exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from mtkit.console import console

        try:
            return command(*args, **kwargs)
        except UserError as exc:
            console.print(f"error: {exc}", style="bold red", markup=False)
            raise typer.Exit(exc.exit_code) from None
        except Interrupted as exc:
            console.print(f"stopped: {exc}; checkpoint saved", markup=False)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            console.print("interrupted", markup=False)
            raise typer.Exit(EXIT_SIGINT) from None
        except OSError as exc:
            if exc.errno is None:
                raise
            where = exc.filename or "output"
            console.print(f"error: {where}: {exc.strerror}", style="bold red", markup=False)
            raise typer.Exit(EXIT_IO) from None

    return wrapper


def emit(data: dict, as_json: bool, text: str) -> None:
    """Results on stdout: JSON for scripts, a short text otherwise."""
    sys.stdout.write((json.dumps(data, indent=None if as_json else 2) if as_json else text) + "\n")
    sys.stdout.flush()


def shard_note(summary: dict) -> str:
    """What a shard's run did, in a line: its lines (counted from 1), and its set merged or the shards it waits for."""
    from mtkit.corpus.sharding import numbers

    (start, end), shard = summary["lines"], summary["shard"]
    head = (
        f"shard {shard}: lines {start + 1}-{end}"
        if end > start
        else f"shard {shard}: no lines (fewer chunks than shards)"
    )
    if summary["merged"]:
        return f"{head}; the set is complete, merged into {' and '.join(summary['merged'])}"
    if summary["waiting_for"]:
        return f"{head}; the set waits for shard {numbers(summary['waiting_for'])} (the last to finish merges it)"
    return f"{head}; another shard merges the set"
