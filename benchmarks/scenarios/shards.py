"""Sharded back-translation on one host: `mtkit back-translate RUN -i INPUT -o OUT` (its defaults: the CTranslate2
engine with its native search, sampling, seed 1, chunks of 10,000 lines) over N lines (--lines, default 100,000;
5,000 with --small), as one process and as two shards at once (docs/many-machines.md).

The input is Multi30k's 29,000 English training sentences cycled to N lines (data/multi30k/train.en.gz): repeats
are fine for timing, and the bulk commands do not dedup, so every line is translated. --demo-run is an en->de run,
so this back-translates English into German: it measures sharding, not the direction.
  1 shard   one process with the threads the command takes by default on this machine: OMP_NUM_THREADS = the
            usable cores, which CTranslate2 takes as intra_threads (sampling decodes on one worker, inter_threads 1).
  2 shards  `--shard 1/2` and `--shard 2/2` started together, OMP_NUM_THREADS=1 each (half the cores of two); the
            shard that finishes last merges the set. Wall from the first start to the last exit (the merged
            outputs written). Each shard runs as `python -c` with mtkit's merge (mtkit.bulk.shard_sets.
            merge_if_complete) wrapped by a timer that prints `MERGE seconds merged` on stderr, and that first
            hard-links the set's files and records into OUT/kept/: the merge removes them, and `mtkit merge-shards
            kept/PREFIX --keep-shards` is then timed on that complete kept set (--rounds times; the process's wall,
            Python's start and mtkit's imports included).
  1 thread  run last: one process with OMP_NUM_THREADS=1, a shard's threads, the control of the byte check (the
            docs promise one process's bytes for the same thread count) and one core's speed.
The outputs (both files) of the 2 shards are compared byte for byte with each single process's. The shards split
the input on chunks, and CTranslate2's sampling opens the model afresh for each chunk (mtkit.bulk.synthetic), so
100,000 lines keep the default: 10 chunks, 5 a shard; an input under two chunks (--small's) is back-translated with
--chunk-lines N/10 by all three, 10 model loads each as there. Before the measured runs an untimed back-translation
of 200 lines exports the run to CTranslate2 (once per run directory) and warms the caches. Everything lives in
bench-out/shards/. One host cannot show what shards on several machines gain: two shards here share its two cores,
its memory bandwidth and its disk, and no shard waits on a shared file system.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import statistics
import sys
from pathlib import Path

from harness import WORK, Measurement, checked, finish, identical_lines, measure, start, thread_env, write_results

from scenarios.texts import demo_run
from scenarios.workload import MULTI30K, mtkit

OUT = WORK / "shards"
LINES, SMALL_LINES = 100_000, 5_000
WARM_LINES = 200
SHARDS = 2
CHUNK = 10_000  # back-translate's default --chunk-lines
# A shard process: mtkit's merge timed, the set hard-linked into KEPT first (argv: the mtkit command's arguments).
WRAPPER = """\
import os, sys, time
from pathlib import Path
import mtkit.bulk.shard_sets as sets
from mtkit.cli.main import main
merge = sets.merge_if_complete
def keep(name):
    kept = Path(os.environ["KEPT"])
    kept.mkdir(parents=True, exist_ok=True)
    for path in name.parent.glob(name.name + "*.shard-*"):
        if path.name.endswith(".progress.json"):
            continue
        link = kept / (path.name + ".link")
        link.unlink(missing_ok=True)
        try:
            os.link(path, link)
        except FileNotFoundError:
            continue
        os.replace(link, kept / path.name)
def timed(name, count):
    keep(name)
    begin = time.perf_counter()
    state = merge(name, count)
    print("MERGE", time.perf_counter() - begin, state["merged"] is not None, file=sys.stderr, flush=True)
    return state
sets.merge_if_complete = timed
main()
"""
_MERGE = re.compile(r"^MERGE (\S+) (True|False)$", re.MULTILINE)


def cycled(lines: int) -> Path:
    """OUT/data/train-LINES.en: Multi30k's English training sentences repeated in order to `lines` lines."""
    path = OUT / "data" / f"train-{lines}.en"
    if not path.is_file():
        with gzip.open(MULTI30K / "train.en.gz", "rt", encoding="utf-8") as f:
            sentences = f.readlines()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(sentences[i % len(sentences)] for i in range(lines)), encoding="utf-8")
        tmp.replace(path)
    return path


def back_translate(run: Path, source: Path, prefix: Path, *flags: str) -> list[str]:
    return ["back-translate", str(run), "-i", str(source), "-o", str(prefix), "--json", *flags]


def chunk_lines(lines: int) -> int:
    """The default chunk, or a tenth of an input too short for one chunk a shard."""
    return CHUNK if lines >= SHARDS * CHUNK else max(1, -(-lines // 10))


def summary(m: Measurement) -> dict:
    return json.loads(m.stdout.strip().splitlines()[-1])


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lines_of(path: Path) -> list[bytes]:
    """The file's lines, split on "\n" only (a translation may hold other line breaks of Unicode)."""
    return path.read_bytes().removesuffix(b"\n").split(b"\n")


def compared(one: list[Path], two: list[Path]) -> dict:
    """Per output file: identical bytes, and when not, how many lines agree."""
    result = {}
    for a, b in zip(one, two):
        same = a.read_bytes() == b.read_bytes()
        entry: dict = {"identical_bytes": same, "sha256": digest(a) if same else [digest(a), digest(b)]}
        if not same:
            lines_a, lines_b = lines_of(a), lines_of(b)
            entry["lines"] = [len(lines_a), len(lines_b)]
            if len(lines_a) == len(lines_b):
                entry["identical_lines"] = identical_lines(lines_a, lines_b)
        result[a.suffix.lstrip(".")] = entry
    return result


def run(args: argparse.Namespace) -> None:
    model = demo_run(args, "shards")
    lines = args.lines or (SMALL_LINES if args.small else LINES)
    source = cycled(lines)
    cores = len(os.sched_getaffinity(0))
    chunk = chunk_lines(lines)
    flags = [] if chunk == CHUNK else ["--chunk-lines", str(chunk)]
    logs = WORK / "logs"

    warm = OUT / "warm"
    shutil.rmtree(warm, ignore_errors=True)
    warm.mkdir(parents=True)
    head = warm / "head.en"
    with open(source, encoding="utf-8") as f:
        head.write_text("".join(next(f) for _ in range(WARM_LINES)), encoding="utf-8")
    print(f"shards: warming up on {WARM_LINES} lines", file=sys.stderr, flush=True)
    checked(measure(mtkit(*back_translate(model, head, warm / "bt")), logs / "shards-warm"), "warm-up")

    def single(name: str, threads: int) -> tuple[Measurement, dict]:
        """One process over the whole input with OMP_NUM_THREADS=threads, into OUT/NAME/bt."""
        shutil.rmtree(OUT / name, ignore_errors=True)
        print(f"shards: 1 shard, {lines} lines, OMP_NUM_THREADS={threads}", file=sys.stderr, flush=True)
        cmd = mtkit(*back_translate(model, source, OUT / name / "bt", *flags))
        m = checked(measure(cmd, logs / f"shards-{name}", thread_env(threads)), f"1 shard, {threads} threads")
        return m, summary(m)

    # (a) one process, the command's default threads
    m_one, s_one = single("one", cores)

    # (b) two shards at once, one thread each; the last to finish merges
    two = OUT / "two"
    shutil.rmtree(two, ignore_errors=True)
    kept = two / "kept"
    env = thread_env(max(1, cores // SHARDS), KEPT=str(kept))
    print(f"shards: {SHARDS} shards at once, {lines} lines, OMP_NUM_THREADS={env['OMP_NUM_THREADS']}", file=sys.stderr)
    started = [
        start(
            [
                sys.executable,
                "-c",
                WRAPPER,
                *back_translate(model, source, two / "bt", *flags, "--shard", f"{k}/{SHARDS}"),
            ],
            logs / f"shards-two-{k}",
            env,
        )
        for k in range(1, SHARDS + 1)
    ]
    measured = [checked(finish(r), f"shard {k}/{SHARDS}") for k, r in enumerate(started, start=1)]
    first = min(r.start for r in started)
    wall_two = max(r.start + m.wall_s for r, m in zip(started, measured)) - first
    merges = []
    for m in measured:
        found = _MERGE.findall(m.stderr)
        if len(found) != 1:
            raise SystemExit(f"a shard's stderr has {len(found)} MERGE lines, not 1:\n{m.stderr[-2000:]}")
        merges.append((float(found[0][0]), found[0][1] == "True"))
    merged_by = [k for k, (_, merged) in enumerate(merges, start=1) if merged]
    if len(merged_by) != 1:
        raise SystemExit(f"{len(merged_by)} shards merged the set, not 1: {merges}")
    merge_s = merges[merged_by[0] - 1][0]

    # (c) one process with a shard's threads: the control of the byte check
    m_thread, s_thread = single("one-thread", int(env["OMP_NUM_THREADS"]))

    outputs_one = [Path(p) for p in s_one["outputs"]]
    outputs_two = [two / p.name for p in outputs_one]
    outputs_kept = [kept / p.name for p in outputs_one]
    outputs_thread = [Path(p) for p in s_thread["outputs"]]
    missing = [str(p.relative_to(OUT)) for p in outputs_two if not p.is_file()]
    if missing:
        raise SystemExit(f"the shards exited but the merged outputs are missing: {missing}")

    # the merge by hand on the kept set
    by_hand = []
    for round_ in range(max(1, args.rounds)):
        cmd = mtkit("merge-shards", str(kept / "bt"), "--keep-shards", "--json")
        by_hand.append(checked(measure(cmd, logs / f"shards-merge-{round_ + 1}"), "mtkit merge-shards"))
    kept_bytes = sum(p.stat().st_size for p in kept.glob("bt.*.shard-*") if not p.name.endswith(".json"))

    lines_per_s = {"1 shard": lines / m_one.wall_s, "2 shards": lines / wall_two, "1 thread": lines / m_thread.wall_s}
    rows = [
        {
            "program": "1 shard",
            "OMP threads each": cores,
            "wall_s": round(m_one.wall_s, 2),
            "lines/s": round(lines_per_s["1 shard"], 1),
            "cpu_s": m_one.cpu_s,
            "peak_rss_mib": m_one.peak_rss_mib,
            "merge_s": "",
        },
        {
            "program": f"{SHARDS} shards at once (first start to merged outputs)",
            "OMP threads each": env["OMP_NUM_THREADS"],
            "wall_s": round(wall_two, 2),
            "lines/s": round(lines_per_s["2 shards"], 1),
            "cpu_s": round(sum(m.cpu_s for m in measured), 3),
            "peak_rss_mib": max(m.peak_rss_mib for m in measured),
            "merge_s": round(merge_s, 4),
        },
        {
            "program": "1 shard, 1 thread (control)",
            "OMP threads each": env["OMP_NUM_THREADS"],
            "wall_s": round(m_thread.wall_s, 2),
            "lines/s": round(lines_per_s["1 thread"], 1),
            "cpu_s": m_thread.cpu_s,
            "peak_rss_mib": m_thread.peak_rss_mib,
            "merge_s": "",
        },
        *(
            {
                "program": f"  shard {k}/{SHARDS}" + (" (merged the set)" if merged else ""),
                "OMP threads each": env["OMP_NUM_THREADS"],
                "wall_s": round(m.wall_s, 2),
                "lines/s": round((s["lines"][1] - s["lines"][0]) / m.wall_s, 1),
                "cpu_s": m.cpu_s,
                "peak_rss_mib": m.peak_rss_mib,
                "merge_s": round(seconds, 4),
            }
            for k, (m, s, (seconds, merged)) in enumerate(
                zip(measured, (summary(m) for m in measured), merges), start=1
            )
        ),
        {
            "program": "mtkit merge-shards on the kept set (process, median)",
            "OMP threads each": "",
            "wall_s": round(statistics.median(m.wall_s for m in by_hand), 3),
            "lines/s": "",
            "cpu_s": round(statistics.median(m.cpu_s for m in by_hand), 3),
            "peak_rss_mib": max(m.peak_rss_mib for m in by_hand),
            "merge_s": "",
        },
    ]
    report = {
        "lines": lines,
        "chunk_lines": chunk,
        "input": f"data/multi30k/train.en.gz ({sum(1 for _ in gzip.open(MULTI30K / 'train.en.gz'))} lines) cycled",
        "cores": cores,
        "model": model.name,
        "back_translate": {k: v for k, v in s_one.items() if k not in ("outputs", "files", "merged")},
        "ratio_lines_per_s_2_to_1": round(lines_per_s["2 shards"] / lines_per_s["1 shard"], 3),
        "ratio_lines_per_s_2_to_1_thread": round(lines_per_s["2 shards"] / lines_per_s["1 thread"], 3),
        "merge_s_in_shard": round(merge_s, 4),
        "merge_share_of_2_shard_wall": round(merge_s / wall_two, 6),
        "merged_by_shard": merged_by[0],
        "merge_s_of_each_shard_call": [round(s, 4) for s, _ in merges],
        "merge_shards_process_wall_s": [m.wall_s for m in by_hand],
        "kept_set_bytes": kept_bytes,
        "shard_lines": [summary(m)["lines"] for m in measured],
        "one_vs_two_shards": compared(outputs_one, outputs_two),
        "one_thread_vs_two_shards": compared(outputs_thread, outputs_two),
        "one_vs_one_thread": compared(outputs_one, outputs_thread),
        "two_shards_vs_merge_shards_by_hand": compared(outputs_two, outputs_kept),
        "threads": {
            "1 shard": f"OMP_NUM_THREADS={cores}: CTranslate2 intra_threads {cores}, inter_threads 1 (sampling)",
            "1 shard, 1 thread": f"OMP_NUM_THREADS={env['OMP_NUM_THREADS']}: intra_threads 1, inter_threads 1",
            "2 shards": f"OMP_NUM_THREADS={env['OMP_NUM_THREADS']} each: intra_threads "
            f"{env['OMP_NUM_THREADS']}, inter_threads 1",
        },
    }
    write_results("shards", report, rows)
