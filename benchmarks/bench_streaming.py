"""`mtkit translate` answering line by line (issue 16): latency on an open pipe and throughput on whole input.

Compares two source trees of mtkit (BEFORE and AFTER, e.g. git worktrees of two commits; each is put first on
PYTHONPATH) on the same run:
- latency: a client writes one line of test_2016_flickr at a time into `mtkit translate RUN` through a pipe it
  keeps open, and waits up to --wait seconds for the answer before writing the next (the first answer also waits
  for the model load). A tree that answers nothing until the input ends is reported as such, with the time from
  closing the pipe to the answers.
- throughput: alternating rounds of whole processes on the 1,000 lines, read from a file (`-i`) and from a pipe
  (`cat FILE | mtkit translate`): decode sent/s from mtkit's own log line, whole-process seconds, peak RSS.
Writes bench-out/streaming/results.json and results.md.
Usage: python benchmarks/bench_streaming.py --model RUN --before TREE --after TREE [--rounds 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import select
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import BENCH_OUT, check_run, run_timed, thread_env  # noqa: E402
from bench_translate import read_test_set  # noqa: E402

OUT = BENCH_OUT / "streaming"
TIMING = "translated {} lines in "


def tree_env(tree: Path, threads: int) -> dict[str, str]:
    """Runs `tree`'s mtkit: first on PYTHONPATH, and python -P keeps the working directory off sys.path."""
    return {**thread_env(threads), "PYTHONPATH": str(tree)}


def read_answer(stdout, seconds: float) -> tuple[str, float | None]:
    """One line from the pipe and the seconds it took, or ("", None) when none came within `seconds`."""
    data = b""
    start = time.monotonic()
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([stdout], [], [], max(start + seconds - time.monotonic(), 0))
        if not ready:
            return data.decode(), None
        chunk = os.read(stdout.fileno(), 1)
        if not chunk:
            return data.decode(), None
        data += chunk
    return data.decode(), time.monotonic() - start


def latency(tree: Path, run_dir: Path, lines: list[str], wait: float, threads: int) -> dict:
    """Each line written into an open pipe: seconds until its translation came back (None: it did not)."""
    cmd = [sys.executable, "-P", "-m", "mtkit", "translate", str(run_dir), "--quiet"]
    process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               env=tree_env(tree, threads))
    seconds: list[float | None] = []
    try:
        for i, line in enumerate(lines):
            process.stdin.write((line + "\n").encode())
            process.stdin.flush()
            _, took = read_answer(process.stdout, wait * 6 if i == 0 else wait)  # the first one loads the model
            seconds.append(took)
            if took is None:
                break
        closed = time.monotonic()
        process.stdin.close()
        rest = process.stdout.read()
        after_close = time.monotonic() - closed
        process.wait(timeout=60)
    finally:
        process.kill()
    answered = [s for s in seconds[1:] if s is not None]
    return {"first_answer_s": seconds[0], "lines_sent": len(seconds), "answered_before_close": sum(s is not None for s in seconds),
            "later_lines_s": [round(s, 3) for s in answered],
            "median_later_s": round(statistics.median(answered), 3) if answered else None,
            "max_later_s": round(max(answered), 3) if answered else None,
            "answers_after_close": rest.decode().count("\n"), "seconds_after_close": round(after_close, 2)}


def throughput_run(tree: Path, run_dir: Path, source: Path, mode: str, tag: str, threads: int) -> dict:
    hyp = OUT / f"{tag}.hyp"
    base = [sys.executable, "-P", "-m", "mtkit", "translate", str(run_dir), "--beam", "4"]
    if mode == "file":
        cmd = base + ["-i", str(source), "-o", str(hyp)]
    else:
        cmd = ["sh", "-c", f"cat {shlex.quote(str(source))} | {shlex.join(base)} > {shlex.quote(str(hyp))}"]
    run = run_timed(cmd, tree_env(tree, threads), OUT / f"{tag}.log")
    check_run(run, tag)
    lines = hyp.read_text(encoding="utf-8").split("\n")[:-1]
    decode = None
    for line in run.stderr.splitlines():
        if TIMING.format(len(lines)) in line:
            decode = float(line.split(" in ")[1].split("s")[0])
    return {"decode_s": decode, "sent_per_s": round(len(lines) / decode, 1) if decode else None,
            "whole_process_s": round(run.wall_s, 2), "peak_rss_mib": round(run.peak_rss_mib), "hyps": lines}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--before", type=Path, required=True, help="source tree of the code before")
    parser.add_argument("--after", type=Path, required=True, help="source tree of the code after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--latency-lines", type=int, default=10)
    parser.add_argument("--wait", type=float, default=5.0, help="seconds to wait for each answer")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    source, lines, _ = read_test_set(None)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    report: dict = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
                    "model": str(args.model), "trees": {k: str(v) for k, v in trees.items()}, "latency": {}, "throughput": []}
    for name, tree in trees.items():
        report["latency"][name] = latency(tree, args.model, lines[: args.latency_lines], args.wait, args.threads)
        print(name, "latency", json.dumps(report["latency"][name]), file=sys.stderr)
    hyps: dict[str, list[str]] = {}
    for round_no in range(1, args.rounds + 1):
        for mode in ("file", "pipe"):
            for name, tree in (trees.items() if round_no % 2 else reversed(trees.items())):
                result = throughput_run(tree, args.model, source, mode, f"{name}-{mode}-r{round_no}", args.threads)
                hyps.setdefault(name, result.pop("hyps"))
                report["throughput"].append({"round": round_no, "tree": name, "mode": mode, **result})
                print(round_no, name, mode, json.dumps(result), file=sys.stderr)
    report["lines_differing_before_after"] = sum(a != b for a, b in zip(hyps["before"], hyps["after"]))
    summary = {}
    for mode in ("file", "pipe"):
        rows = {name: [r for r in report["throughput"] if r["tree"] == name and r["mode"] == mode] for name in trees}
        ratios = [a["sent_per_s"] / b["sent_per_s"] for a, b in zip(rows["after"], rows["before"])]
        whole = [b["whole_process_s"] / a["whole_process_s"] for a, b in zip(rows["after"], rows["before"])]
        summary[mode] = {"after_over_before_sent_per_s": [round(r, 3) for r in ratios],
                         "mean_ratio": round(statistics.mean(ratios), 3),
                         "whole_process_speedup": [round(r, 3) for r in whole],
                         **{f"{name}_sent_per_s": [r["sent_per_s"] for r in rows[name]] for name in trees}}
    report["summary"] = summary
    (OUT / "results.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({"latency": report["latency"], "summary": summary,
                      "lines_differing_before_after": report["lines_differing_before_after"]}, indent=2))


if __name__ == "__main__":
    main()
