"""A set of shards and its merge: each shard's record beside its files (NAME.shard-K-of-N.json: what made it, its
lines, whether it is done and its files' sizes), the check that a set is complete (mtkit.corpus.sharding) and made
alike, and the merge that concatenates the shards' files in order into the set's outputs, each written atomically.
The shard that completes a set merges it; `mtkit merge-shards NAME` does the same by hand. Knows no model and no
command's format.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtkit.bulk.shards import ShardSpec, line_range, shard_file
from mtkit.console import warn
from mtkit.corpus.sharding import check_complete, find_set, set_size, shard_path
from mtkit.errors import LockedError, UserError, check
from mtkit.files import DirectoryLock, atomic_write, write_text

# What every shard of a set must share, as its record spells it; the identity (model, input, options) is compared
# key by key so that a refusal names the option.
SHARED = ("command", "total", "align", "outputs", "extra")


@dataclass
class Shard:
    """One shard of a set: the lines it takes, the files it writes beside the set's outputs (FILE.shard-K-of-N),
    its progress file for mtkit.bulk.resumable, and its record."""

    name: Path  # the set: the command's --output or --out PREFIX, after which the records and the lock are named
    spec: ShardSpec
    outputs: list[Path]  # the set's outputs, in NAME's folder
    command: str
    identity: dict[str, str]  # what decides the output (model, input, options): the resume identity too
    total: int  # input lines (pairs)
    align: int  # the command's chunk: a shard starts on a chunk boundary of the whole input
    extra: dict[str, Any] = field(default_factory=dict)  # what is done after the merge (filter-pairs' selection)

    def __post_init__(self) -> None:
        assert all(path.parent == self.name.parent for path in self.outputs), "a set's files share one folder"
        self.start, self.end = self.spec.line_range(self.total, self.align)

    @property
    def files(self) -> list[Path]:
        return [shard_file(path, self.spec) for path in self.outputs]

    @property
    def progress(self) -> Path:
        return shard_path(self.name, self.spec.index, self.spec.count, ".progress.json")

    @property
    def record_path(self) -> Path:
        return record_path(self.name, self.spec)

    def resume_identity(self) -> dict[str, str]:
        """The identity a progress file of this shard holds: the job's and the shard's place in its set."""
        return {**self.identity, "shard": f"{self.spec.index}/{self.spec.count}", "lines": f"{self.start}-{self.end}"}

    def record(self, done: bool) -> dict[str, Any]:
        return {
            "command": self.command,
            "shard": self.spec.index,
            "shards": self.spec.count,
            "lines": [self.start, self.end],
            "total": self.total,
            "align": self.align,
            "outputs": [path.name for path in self.outputs],
            "identity": self.identity,
            "extra": self.extra,
            "done": done,
            "sizes": [path.stat().st_size for path in self.files] if done else None,
        }

    def already_done(self) -> bool:
        """Whether a run of this very shard finished (its record says so, for this job, and its files are whole):
        run again (a requeued array task), it has nothing to do."""
        saved = read_record(self.record_path, quiet=True)
        if saved is None or not saved.get("done"):
            return False
        wanted = self.record(False)
        same = all(saved.get(key) == wanted[key] for key in (*SHARED, "identity", "shard", "shards", "lines"))
        return same and all(
            path.is_file() and path.stat().st_size == size for path, size in zip(self.files, saved["sizes"])
        )

    def begin(self) -> None:
        """Record the shard as started: merge-shards names it unfinished until `finish`."""
        write_text(self.record_path, json.dumps(self.record(False)) + "\n")

    def finish(self) -> dict[str, Any]:
        """Record the shard as done (its files are synced: mtkit.bulk.resumable), drop its progress file, and merge
        the set when this shard completes it; returns what the command's summary says of the shard."""
        if not self.already_done():
            write_text(self.record_path, json.dumps(self.record(True)) + "\n")
        self.progress.unlink(missing_ok=True)
        summary: dict[str, Any] = {
            "shard": f"{self.spec.index}/{self.spec.count}",
            "lines": [self.start, self.end],
            "files": [str(path) for path in self.files],
        }
        state = merge_if_complete(self.name, self.spec.count)
        state.pop("record", None)  # the command knows its own
        return {**summary, **state}


def record_path(name: Path, spec: ShardSpec) -> Path:
    return shard_path(name, spec.index, spec.count, ".json")


def read_record(path: Path, quiet: bool = False) -> dict[str, Any] | None:
    """A shard's record; a damaged one is a one-line error naming it (None when `quiet`, or when it is gone)."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(saved, dict) or not all(key in saved for key in (*SHARED, "identity", "lines", "done")):
            raise ValueError("fields missing")
        return saved
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        if quiet:
            return None
        raise UserError(f"{path}: not a shard record ({exc}); run that shard again with --overwrite") from None


def check_set(name: Path, count: int | None = None) -> list[dict[str, Any]]:
    """The records of shards 1..N of NAME (N: `count`, else the one set there), each checked done, made as shard 1
    was and with its files whole; a one-line error names the shards missing or unfinished, or the mismatch."""
    found = find_set(name, ".json")
    count = count or set_size(name, found, "merge", "records", f"{name}.shard-K-of-N.json")
    records = {index: read_record(path) for (index, size), path in found.items() if size == count}
    present = {index for index, record in records.items() if record is not None}
    unfinished = [index for index, record in records.items() if record is not None and not record["done"]]
    check_complete(name, count, present, "merge", "run them", unfinished)
    first = records[1]
    for index in range(1, count + 1):
        record = records[index]
        assert record is not None
        differs = [key for key in SHARED if record[key] != first[key]]
        differs += sorted(
            key for key in set(record["identity"]) | set(first["identity"])
            if record["identity"].get(key) != first["identity"].get(key)
        )  # fmt: skip
        check(
            not differs,
            f"{name}: shard {index} of {count} was made with another {', '.join(differs)} than shard 1; run it again "
            "as the others ran (with --overwrite)",
        )
        spec = ShardSpec(index, count)
        check(
            record["lines"] == list(line_range(first["total"], count, index - 1, first["align"])),
            f"{record_path(name, spec)}: lines {record['lines']} are not shard {index}'s of {count}",
        )
        for output, size in zip(first["outputs"], record["sizes"]):
            path = shard_file(name.parent / output, spec)
            actual = path.stat().st_size if path.is_file() else None
            check(
                actual == size,
                f"{path}: {'missing' if actual is None else f'{actual} bytes'}, its record says {size} bytes; run "
                f"shard {index} again with --overwrite",
            )
    return [records[index] for index in range(1, count + 1)]  # type: ignore[misc]


def merge_lock(name: Path) -> DirectoryLock:
    return DirectoryLock(name.parent, warn, name=f".{name.name}.merge.lock", subject=f"{name}: merging its shards")


def merge_set(name: Path, keep_shards: bool = False) -> dict[str, Any]:
    """`mtkit merge-shards NAME`: check the set and merge it; returns the outputs and shard 1's record (its
    command, `extra`)."""
    with merge_lock(name):
        return concatenate(name, check_set(name), keep_shards)


def merge_if_complete(name: Path, count: int) -> dict[str, Any]:
    """Merge the set of `count` shards when every one is done: {"merged": outputs, "record": shard 1's}; else
    {"merged": None, "waiting_for": the shards not done}. A set another shard is merging, or has merged, is left
    to it; a complete set made otherwise than alike is refused as merge-shards refuses it."""
    try:
        with merge_lock(name):
            found = find_set(name, ".json")
            done = {
                index
                for (index, size), path in found.items()
                if size == count and (read_record(path, quiet=True) or {}).get("done")
            }
            if not done:  # this shard's record too is gone: another shard merged the set meanwhile
                return {"merged": None, "waiting_for": []}
            waiting = [index for index in range(1, count + 1) if index not in done]
            if waiting:
                return {"merged": None, "waiting_for": waiting}
            return {**concatenate(name, check_set(name, count), keep_shards=False), "waiting_for": []}
    except LockedError:
        return {"merged": None, "waiting_for": []}  # the shard that holds the lock merges the set


def concatenate(name: Path, records: list[dict[str, Any]], keep_shards: bool) -> dict[str, Any]:
    """Each output written as its shards' files end to end, in shard order (atomically: a temporary file renamed);
    then, unless kept, the shards' files and records removed."""
    first, count = records[0], len(records)
    specs = [ShardSpec(index, count) for index in range(1, count + 1)]
    outputs = [name.parent / output for output in first["outputs"]]
    for output in outputs:
        with atomic_write(output, "wb") as merged:
            for spec in specs:
                with open(shard_file(output, spec), "rb") as part:
                    shutil.copyfileobj(part, merged, 1 << 20)
    if not keep_shards:
        for spec in specs:
            for output in outputs:
                shard_file(output, spec).unlink(missing_ok=True)
            record_path(name, spec).unlink(missing_ok=True)
    return {"merged": [str(path) for path in outputs], "record": first}
