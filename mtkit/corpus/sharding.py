"""Shard K of N, alike for a sharded preprocess run and a bulk job: the share of the input it takes, its label and
its name beside the whole's (DATA.shard-00002-of-00003, FILE.shard-00002-of-00003), a set's shards found beside
that name, and the check that they are one set, of one size, with none missing. Knows no manifest and no record:
mtkit.corpus.shards and mtkit.bulk.shard_sets check what each shard holds.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from pathlib import Path

from mtkit.errors import check


def shard_range(total: int, index: int, count: int, align: int) -> tuple[int, int]:
    """Items [start, end) of shard `index` (from 1) of `count` over `total` items (pairs, lines): the ceil(total /
    align) chunks of `align` items split as [floor((K-1) C / N), floor(K C / N)), so a shard starts on a chunk of
    the whole input and encodes, or translates, the chunks one run does. More shards than chunks leave some with
    none."""
    assert total >= 0 and 1 <= index <= count and align >= 1
    chunks = -(-total // align)
    start, end = ((index - 1) * chunks // count) * align, (index * chunks // count) * align
    return min(start, total), min(end, total)


def shard_label(index: int, count: int) -> str:
    """shard-00002-of-00003: shard K of N (from 1), zero-padded so that a set sorts in order."""
    width = max(5, len(str(count)))
    return f"shard-{index:0{width}d}-of-{count:0{width}d}"


def shard_path(name: Path, index: int, count: int, suffix: str = "") -> Path:
    """NAME.shard-00002-of-00003 and `suffix` (a bulk shard's record: .json), beside NAME: a preprocess shard's
    directory, a bulk shard's files and record alike."""
    return name.with_name(f"{name.name}.{shard_label(index, count)}{suffix}")


def find_set(name: Path, suffix: str = "") -> dict[tuple[int, int], Path]:
    """(K, N) -> NAME.shard-K-of-N`suffix` of every shard beside NAME, of any set size (of any label width)."""
    pattern = re.compile(re.escape(name.name) + r"\.shard-(\d+)-of-(\d+)" + re.escape(suffix))
    if not name.parent.is_dir():
        return {}
    return {
        (int(match.group(1)), int(match.group(2))): entry
        for entry in name.parent.iterdir()
        if (match := pattern.fullmatch(entry.name))
    }


def numbers(values: Collection[int]) -> str:
    """2, 5-7, 9: shard numbers with runs joined."""
    runs: list[list[int]] = []
    for value in sorted(values):
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def set_size(name: Path, found: Mapping[tuple[int, int], Path], step: str, shards: str, pattern: str) -> int:
    """N of the one set whose shards `found` are there; none (no `pattern` beside NAME), or shards of sets of several
    sizes, are a one-line error. `step` is what the whole set waits for (join, merge), `shards` what a shard leaves
    beside NAME (records, shard directories)."""
    check(found, f"{name}: no shards to {step} (no {pattern})")
    sizes = sorted({count for _, count in found})
    check(
        len(sizes) == 1,
        f"{name}: {shards} of sets of {' and '.join(map(str, sizes))} shards; remove the files of the set not wanted "
        f"({name}.shard-*-of-*) and {step} again",
    )
    return sizes[0]


def check_complete(
    name: Path,
    count: int,
    present: Collection[int],
    step: str,
    redo: str,
    unfinished: Collection[int] = (),
    by_name: bool = False,
) -> None:
    """Shards 1..`count` of NAME are all `present` and none `unfinished`; else a one-line error names the shards
    missing (by number, or `by_name` by their NAME.shard-K-of-N) and unfinished, and says to `redo` them, then `step`
    again."""
    missing = [index for index in range(1, count + 1) if index not in present]
    named = ", ".join(shard_path(name, index, count).name for index in missing) if by_name else numbers(missing)
    problems = [f"{named} missing"] if missing else []
    if unfinished:
        problems.append(f"{numbers(unfinished)} not finished")
    check(not problems, f"{name}: a set of {count} shards, {' and '.join(problems)}; {redo}, then {step} again")
