"""Which share of a bulk job one process takes: shard K of N (1-based) from `--shard K/N`, or from torchrun's
RANK/WORLD_SIZE and a Slurm job array's SLURM_ARRAY_TASK_* variables; the contiguous line range a shard takes, fixed
by the input's line count alone (mtkit.corpus.sharding: as a preprocess shard's), the names of a shard's files; its
lines read without decoding the lines before.
Pure bookkeeping: no model, and no file written (mtkit.bulk.shard_sets records and merges a set).
"""

from __future__ import annotations

import gzip
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from mtkit.corpus.sharding import shard_label, shard_path, shard_range
from mtkit.errors import UserError, check
from mtkit.files import BAD_UTF8_MODES, count_lines, decode_line, open_binary

T = TypeVar("T")
SHARD_SYNTAX = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")
TORCHRUN = ("RANK", "WORLD_SIZE")
SLURM_ARRAY = ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_STEP")


@dataclass(frozen=True)
class ShardSpec:
    """Shard `index` of `count`, counted from 1 as the file names count; `origin` says where that was read (the
    option or the environment variables), for messages."""

    index: int
    count: int
    origin: str = "--shard"

    def __post_init__(self) -> None:
        check(self.count >= 1, f"{self.origin}: {self.count} shards: at least 1")
        check(
            1 <= self.index <= self.count,
            f"{self.origin}: shard {self.index} of {self.count}: shards count from 1, 1/{self.count} to "
            f"{self.count}/{self.count}",
        )

    @property
    def label(self) -> str:
        """shard-00002-of-00003 (mtkit.corpus.sharding.shard_label)."""
        return shard_label(self.index, self.count)

    def line_range(self, total: int, align: int = 1) -> tuple[int, int]:
        return line_range(total, self.count, self.index - 1, align)


def line_range(total: int, count: int, index: int, align: int = 1) -> tuple[int, int]:
    """Lines [start, end) of shard `index` (0-based) of `count` over `total` lines: the shards split the input's
    ceil(total / align) chunks of `align` lines as [floor(k * C / N), floor((k + 1) * C / N)), so each starts on a
    chunk boundary of the whole input (a chunk is translated, and for sampling seeded, as in one process) and, for
    align 1, takes [floor(k * L / N), floor((k + 1) * L / N)). More shards than chunks leave some with none."""
    return shard_range(total, index + 1, count, align)  # the arithmetic sharded preprocessing uses too


def parse_shard(text: str) -> ShardSpec:
    """`--shard K/N`: shard K of N, K from 1 to N."""
    match = SHARD_SYNTAX.fullmatch(text)
    check(match is not None, f"--shard {text!r}: K/N, shard K of N counted from 1 (e.g. 2/8)")
    index, count = int(match.group(1)), int(match.group(2))  # type: ignore[union-attr]
    return ShardSpec(index, count, f"--shard {text.strip()}")


def _whole(environ: Mapping[str, str], name: str) -> int | None:
    """A variable's whole number, None when unset or empty; anything else is a one-line error naming it."""
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    check(raw.isdigit(), f"{name}={raw!r}: not a whole number (give --shard K/N to choose the shard yourself)")
    return int(raw)


def torchrun_share(environ: Mapping[str, str]) -> tuple[int, int] | None:
    """(RANK, WORLD_SIZE) as torchrun sets them (rank from 0), or None when neither is set."""
    rank, world = (_whole(environ, name) for name in TORCHRUN)
    if rank is None and world is None:
        return None
    check(
        rank is not None and world is not None,
        f"{'RANK' if rank is None else 'WORLD_SIZE'} is not set but {'WORLD_SIZE' if rank is None else 'RANK'} is "
        "(torchrun sets both); give --shard K/N",
    )
    assert rank is not None and world is not None
    check(world >= 1 and rank < world, f"RANK={rank}: not below WORLD_SIZE={world}; give --shard K/N")
    return rank, world


def slurm_array_share(environ: Mapping[str, str]) -> tuple[int, int] | None:
    """(this task's place in the array from 0, the array's task count), or None outside a Slurm job array. Ids run
    from SLURM_ARRAY_TASK_MIN in steps of SLURM_ARRAY_TASK_STEP (--array=1-8 starts at 1, --array=0-14:2 steps by
    2); an array whose ids are not such a run (--array=1,4,9) cannot be split by its ids."""
    task, count, first, step = (_whole(environ, name) for name in SLURM_ARRAY)
    if task is None:
        return None
    check(
        count is not None and first is not None,
        f"SLURM_ARRAY_TASK_ID={task} without SLURM_ARRAY_TASK_COUNT and SLURM_ARRAY_TASK_MIN (Slurm sets all three "
        "in an array job); give --shard K/N",
    )
    step = step or 1
    place, rest = divmod(task - first, step)  # type: ignore[operator]
    check(
        count >= 1 and place >= 0 and rest == 0 and place < count,  # type: ignore[operator]
        f"SLURM_ARRAY_TASK_ID={task}: not one of the {count} ids SLURM_ARRAY_TASK_MIN={first} + k * "
        f"SLURM_ARRAY_TASK_STEP={step}; give --shard K/N",
    )
    return place, count  # type: ignore[return-value]


def shard_from_environ(environ: Mapping[str, str]) -> ShardSpec | None:
    """The shard the environment gives: a Slurm array task's, torchrun's rank's, or both (each array task running
    torchrun: the task's WORLD_SIZE shards in a row, task-major); None outside both."""
    index, count, origins = 0, 1, []
    for share, origin in (
        (slurm_array_share(environ), "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT"),
        (torchrun_share(environ), "RANK/WORLD_SIZE"),
    ):
        if share is not None:
            index, count = index * share[1] + share[0], count * share[1]
            origins.append(origin)
    return ShardSpec(index + 1, count, " and ".join(origins)) if origins else None


def resolve_shard(option: str | None, environ: Mapping[str, str]) -> ShardSpec | None:
    """The shard this process takes: `--shard` when given (it wins over the environment), else the environment's;
    None for the whole input in one process (no shard, or one shard of one: `--shard 1/1` turns sharding off)."""
    spec = parse_shard(option) if option is not None else shard_from_environ(environ)
    return spec if spec is not None and spec.count > 1 else None


def shard_file(path: Path, spec: ShardSpec) -> Path:
    """The file shard `spec` writes for the output `path`: PATH.shard-00002-of-00003."""
    return shard_path(path, spec.index, spec.count)


def read_line_range(path: Path, start: int, end: int | None, on_bad_utf8: str = "error") -> Iterator[str]:
    """Lines [start, end) of a plain or .gz file (end None: to its end), as mtkit.files.read_lines gives them; the
    lines before `start` are skipped undecoded, and an error names its line's number in the whole file."""
    check(on_bad_utf8 in BAD_UTF8_MODES, f"--on-bad-utf8 must be one of {BAD_UTF8_MODES}")
    with open_binary(path) as handle:
        try:
            for lineno, raw in enumerate(itertools.islice(handle, start, end), start=start + 1):
                yield decode_line(raw.rstrip(b"\n"), path, lineno, on_bad_utf8)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise UserError(f"{path}: cannot read ({exc})") from None


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Lists of `size` items (the last may be shorter)."""
    rest = iter(items)
    while chunk := list(itertools.islice(rest, size)):
        yield chunk


def read_pair_chunks(
    source: Path, target: Path, start: int, end: int, size: int
) -> Iterator[tuple[list[str], list[str]]]:
    """(sources, targets) of `size` pairs of two line-aligned files' lines [start, end), as mtkit.bulk.forced's
    read_pairs gives them."""
    for pairs in chunked(zip(read_line_range(source, start, end), read_line_range(target, start, end)), size):
        yield [s for s, _ in pairs], [t for _, t in pairs]


def count_pairs(source: Path, target: Path) -> int:
    """The line count of two line-aligned files; files of different lengths are a one-line error naming both."""
    lines = count_lines(source), count_lines(target)
    check(lines[0] == lines[1], f"{source} has {lines[0]} lines, {target} {lines[1]}: the files must be line-aligned")
    return lines[0]
