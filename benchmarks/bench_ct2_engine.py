"""`mtkit translate --engine ctranslate2` against a bare CTranslate2 script on the same exported model (issue 22).

On test_2016_flickr (or its first --lines lines), beam 4:
- whole process: `mtkit translate RUN --engine ctranslate2 --length-penalty 0` and ct2_translate_export.py (ctranslate2
  and sentencepiece only) on RUN/ctranslate2 (alpha 0: the bare script has no GNMT), in alternating rounds: wall
  seconds and peak RSS (/usr/bin/time -v), and their ratios per round. Two bare baselines: `search` decodes as the
  engine does (mtkit's stopping rule: `beam` finished hypotheses), `matched` stops a sentence when its best beam
  ends (CTranslate2's rule: less work, a few lines differ from mtkit's).
- identical lines against `--engine torch` at alpha 0, 0.6 and 1.0 (fp32 / float32), and against the bare script.
- --dtype int8 against float32 with this engine: whole-process speed ratio per round and identical lines.
- BLEU (sacreBLEU, test_2016_flickr references) of every output.
- latency: lines written one at a time into an open pipe; seconds to each answer once the model is loaded.
Writes bench-out/ct2_engine/results.json and results.md.
Usage: python benchmarks/bench_ct2_engine.py --model RUN [--rounds 3] [--threads 2] [--lines 1000]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_streaming import read_answer  # noqa: E402
from bench_train import BENCH_OUT, check_run, run_timed, thread_env  # noqa: E402
from bench_translate import read_test_set  # noqa: E402

OUT = BENCH_OUT / "ct2_engine"
BARE = Path(__file__).resolve().parent / "ct2_translate_export.py"


def mtkit_translate(run_dir: Path, source: Path, tag: str, threads: int, *options: str) -> dict:
    """One whole `mtkit translate` process on `source`: wall seconds, peak RSS and its lines."""
    hyp = OUT / f"{tag}.hyp"
    cmd = [sys.executable, "-m", "mtkit", "translate", str(run_dir), "--beam", "4", "-q", "-i", str(source),
           "-o", str(hyp), *options]
    return timed(cmd, hyp, tag, threads)


def bare_translate(export: Path, source: Path, tag: str, threads: int, settings: str) -> dict:
    hyp = OUT / f"{tag}.hyp"
    cmd = [sys.executable, str(BARE), str(export), str(source), str(hyp), "--threads", str(threads), "--settings", settings]
    return timed(cmd, hyp, tag, threads)


def timed(cmd: list[str], hyp: Path, tag: str, threads: int) -> dict:
    run = run_timed(cmd, thread_env(threads), OUT / f"{tag}.log")
    check_run(run, tag)
    return {"wall_s": round(run.wall_s, 3), "peak_rss_mib": round(run.peak_rss_mib, 1),
            "hyps": hyp.read_text(encoding="utf-8").split("\n")[:-1]}


def latency(run_dir: Path, lines: list[str], threads: int, wait: float = 10.0) -> dict:
    """Lines written one at a time into an open pipe: seconds to the first answer (model load) and to the others."""
    cmd = [sys.executable, "-m", "mtkit", "translate", str(run_dir), "--engine", "ctranslate2", "--quiet"]
    process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               env=thread_env(threads))
    seconds: list[float | None] = []
    try:
        for i, line in enumerate(lines):
            process.stdin.write((line + "\n").encode())
            process.stdin.flush()
            _, took = read_answer(process.stdout, wait * 6 if i == 0 else wait)
            seconds.append(took)
            if took is None:
                break
        process.stdin.close()
        process.wait(timeout=60)
    finally:
        process.kill()
    later = [s for s in seconds[1:] if s is not None]
    return {"first_answer_s": seconds[0], "answered": len(later) + (seconds[0] is not None),
            "median_later_s": round(statistics.median(later), 4) if later else None,
            "max_later_s": round(max(later), 4) if later else None}


def same(a: list[str], b: list[str]) -> int:
    return sum(x == y for x, y in zip(a, b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="RUN_DIR")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lines", type=int, default=None, help="first N test lines (default all 1,000)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    from mtkit.score import score

    source, lines, refs = read_test_set(args.lines)
    export = args.model / "ctranslate2"
    mtkit_translate(args.model, source, "warm-cache", args.threads, "--engine", "ctranslate2")  # exports if needed
    report: dict = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
                    "model": str(args.model), "lines": len(lines), "threads": args.threads, "rounds": []}
    outputs: dict[str, list[str]] = {}
    for round_no in range(1, args.rounds + 1):
        jobs = {
            "engine": lambda tag: mtkit_translate(args.model, source, tag, args.threads, "--engine", "ctranslate2",
                                                  "--length-penalty", "0"),
            "bare": lambda tag: bare_translate(export, source, tag, args.threads, "search"),
            "bare_matched": lambda tag: bare_translate(export, source, tag, args.threads, "matched"),
            "engine_int8": lambda tag: mtkit_translate(args.model, source, tag, args.threads, "--engine", "ctranslate2",
                                                       "--length-penalty", "0", "--dtype", "int8"),
        }
        order = list(jobs) if round_no % 2 else list(reversed(jobs))
        row = {"round": round_no}
        for name in order:
            result = jobs[name](f"{name}-r{round_no}")
            outputs.setdefault(name, result.pop("hyps"))
            row[name] = result
            print(round_no, name, json.dumps(result), file=sys.stderr)
        row["wall_ratio_engine_over_bare"] = round(row["engine"]["wall_s"] / row["bare"]["wall_s"], 3)
        row["rss_ratio_engine_over_bare"] = round(row["engine"]["peak_rss_mib"] / row["bare"]["peak_rss_mib"], 3)
        row["wall_ratio_engine_over_bare_matched"] = round(row["engine"]["wall_s"] / row["bare_matched"]["wall_s"], 3)
        row["rss_ratio_engine_over_bare_matched"] = round(
            row["engine"]["peak_rss_mib"] / row["bare_matched"]["peak_rss_mib"], 3)
        row["speed_ratio_int8_over_float32"] = round(row["engine"]["wall_s"] / row["engine_int8"]["wall_s"], 3)
        report["rounds"].append(row)
    report["identical_engine_bare"] = same(outputs["engine"], outputs["bare"])
    report["identical_engine_bare_matched"] = same(outputs["engine"], outputs["bare_matched"])
    report["identical_int8_float32"] = same(outputs["engine"], outputs["engine_int8"])
    report["identical_to_torch"] = {}
    for alpha in ("0", "0.6", "1.0"):
        ct2 = outputs["engine"] if alpha == "0" else mtkit_translate(
            args.model, source, f"ct2-a{alpha}", args.threads, "--engine", "ctranslate2", "--length-penalty", alpha)["hyps"]
        torch = mtkit_translate(args.model, source, f"torch-a{alpha}", args.threads, "--length-penalty", alpha)["hyps"]
        report["identical_to_torch"][alpha] = same(ct2, torch)
        outputs[f"torch_a{alpha}"] = torch
    report["bleu"] = {name: round(score(hyps, [refs]).bleu, 2) for name, hyps in outputs.items()}
    report["latency"] = latency(args.model, lines[:10], args.threads)
    (OUT / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    (OUT / "results.md").write_text(markdown(report))
    print(markdown(report))


def markdown(report: dict) -> str:
    rows = ["| round | engine s | bare s (search) | ratio | engine MiB | bare MiB | ratio | bare s (matched) | ratio "
            "| bare MiB | ratio | int8 s | float32/int8 time |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["rounds"]:
        rows.append(f"| {r['round']} | {r['engine']['wall_s']} | {r['bare']['wall_s']} | {r['wall_ratio_engine_over_bare']} "
                    f"| {r['engine']['peak_rss_mib']} | {r['bare']['peak_rss_mib']} | {r['rss_ratio_engine_over_bare']} "
                    f"| {r['bare_matched']['wall_s']} | {r['wall_ratio_engine_over_bare_matched']} "
                    f"| {r['bare_matched']['peak_rss_mib']} | {r['rss_ratio_engine_over_bare_matched']} "
                    f"| {r['engine_int8']['wall_s']} | {r['speed_ratio_int8_over_float32']} |")
    n = report["lines"]
    torch = ", ".join(f"alpha {a}: {k}/{n}" for a, k in report["identical_to_torch"].items())
    return (f"# mtkit translate --engine ctranslate2 ({report['date']}, {n} lines, {report['threads']} threads)\n\n"
            + "\n".join(rows) + "\n\n"
            f"- identical lines to --engine torch: {torch}\n"
            f"- identical to the bare script (alpha 0): search {report['identical_engine_bare']}/{n}, "
            f"matched {report['identical_engine_bare_matched']}/{n}; int8 vs float32: {report['identical_int8_float32']}/{n}\n"
            f"- BLEU: {json.dumps(report['bleu'])}\n"
            f"- open pipe: {json.dumps(report['latency'])}\n")


if __name__ == "__main__":
    main()
