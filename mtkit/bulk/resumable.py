"""Output files written chunk by chunk so that a long job killed at any moment goes on where it stopped: after
each chunk the outputs are flushed and synced, then a small state file records the input lines done and the
outputs' sizes; a restart truncates the outputs to those sizes (bytes of a chunk cut by the kill) and skips the
lines done. The state also holds what the job was asked (its identity; `translator_identity` for a model's job):
another job's state is refused.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtkit.errors import UserError, check
from mtkit.files import file_identity, write_text

if TYPE_CHECKING:
    from mtkit.engines.contract import Translating


class ResumableOutputs:
    """Append-only outputs with a progress file beside them; `done` input lines are already written."""

    def __init__(self, state: Path, outputs: list[Path], identity: dict[str, Any], overwrite: bool = False) -> None:
        self.state, self.outputs, self.identity = Path(state), [Path(p) for p in outputs], identity
        self.done = 0
        if overwrite or not self.state.exists():
            for path in self.outputs:  # a fresh start: nothing left from an earlier job
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(b"")
            self._save()
            return
        saved = self._load()
        differs = sorted(
            key for key in set(identity) | set(saved["identity"]) if identity.get(key) != saved["identity"].get(key)
        )
        check(
            not differs,
            f"{self.state}: an unfinished job with other {', '.join(differs)} wrote these outputs; "
            "run it as it was to go on, or add --overwrite to start again",
        )
        for path, size in zip(self.outputs, saved["sizes"]):
            check(
                path.exists() and path.stat().st_size >= size,
                f"{path}: shorter than {self.state} says ({size} bytes): it was changed; add --overwrite",
            )
            with open(path, "r+b") as handle:
                handle.truncate(size)
        self.done = saved["done"]

    def _load(self) -> dict[str, Any]:
        try:
            saved = json.loads(self.state.read_text(encoding="utf-8"))
            if not isinstance(saved, dict) or len(saved["sizes"]) != len(self.outputs):
                raise ValueError("wrong shape")
            return saved
        except (ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{self.state}: not a progress file of this job ({exc}); add --overwrite") from None

    def _save(self) -> None:
        sizes = [path.stat().st_size for path in self.outputs]
        write_text(self.state, json.dumps({"done": self.done, "sizes": sizes, "identity": self.identity}) + "\n")

    def append(self, texts: list[str], lines: int) -> None:
        """Append texts[i] to output i, make them durable, then record `lines` more input lines done."""
        for path, text in zip(self.outputs, texts, strict=True):
            with open(path, "ab") as handle:
                handle.write(text.encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
        self.done += lines
        self._save()

    def finish(self) -> None:
        """The job is complete: no state to resume from."""
        self.state.unlink(missing_ok=True)


def translator_identity(translator: Translating, inputs: dict[str, Path], options: dict[str, Any]) -> dict[str, str]:
    """A job's identity for a translator: its model, its inputs (path, size, modification time), where, in what
    precision and on how many threads per batch it runs (each can change a line), its search as resolved from the
    recipe (the worker count changes no output) and the job's own `options`."""
    checkpoint = Path(str(translator.info.get("checkpoint")))
    search = {key: value for key, value in asdict(translator.cfg).items() if key != "workers"}
    return {
        "model": file_identity(checkpoint) if checkpoint.is_file() else str(checkpoint),
        **{name: file_identity(path) for name, path in inputs.items()},
        "device": str(translator.device),
        "dtype": str(translator.describe()["dtype"]),
        "threads": str(translator.info.get("threads", "")),
        **{key: str(value) for key, value in {**search, **options}.items()},
    }
