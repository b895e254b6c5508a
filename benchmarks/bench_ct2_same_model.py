"""mtkit against CTranslate2 on the same model: the run exported by `mtkit export`, in alternating rounds.

Exports RUN to CTranslate2 twice (float32 and int8 weights), then in each round runs, each as a whole process
under /usr/bin/time -v: `mtkit translate` fp32 (one batch at a time, and --workers 2) and bf16, and
benchmarks/ct2_translate_export.py (ctranslate2 + sentencepiece only) with compute types float32 and int8, each with
inter_threads 1 x intra_threads T and inter 2 x intra T/2 (PROGRAMS), on test_2016_flickr, beam 4, at two settings:
matched (length penalty 0 and mtkit's maximum length in both) and each engine's defaults (mtkit's GNMT 0.6,
CTranslate2's length_penalty 1 and max_decoding_length 256). Both batch by 4,000 source tokens (mtkit's default).
Reported per program: sentences/s and target tokens/s over each program's own decode timing (its
`translated N lines in X s` line: after the model load, tokenization and detokenization included), whole-process
seconds and peak RSS; per pair (PAIRS: mtkit fp32 / CT2 float32, mtkit bf16 / CT2 int8) the per-round ratios and the
identical lines. Target tokens are counted the same way for both: the output's spm pieces, no end token.
Writes bench-out/ct2-same/results.json and results.md.
Usage: python benchmarks/bench_ct2_same_model.py [--model RUN | --train-minutes M] [--lines N] [--rounds 3]
       [--threads 2] [--json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import BENCH_OUT, check_run, finite, mtkit_command, run_timed, thread_env  # noqa: E402
from bench_translate import ensure_model, read_test_set  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = BENCH_OUT / "ct2-same"
CT2_PROGRAM = HERE / "ct2_translate_export.py"
BATCH_TOKENS = 4000
SETTINGS = ("matched", "defaults")
# name -> (engine, precision); every round runs each of them once per setting, in this order.
# name -> (engine, precision, batches at once). mtkit runs one batch at a time on all threads (its default) and, as
# "mtkit fp32 2x1", --workers 2 of threads / 2 each. CTranslate2 runs both ways: inter_threads 1 x intra T (its
# default layout) and inter 2 x intra T / 2 ("2x1").
PROGRAMS = {"mtkit fp32": ("mtkit", "fp32", 1), "mtkit fp32 2x1": ("mtkit", "fp32", 2),
            "ct2 float32": ("ct2", "float32", 1), "ct2 float32 2x1": ("ct2", "float32", 2),
            "mtkit bf16": ("mtkit", "bf16", 1), "ct2 int8": ("ct2", "int8", 1), "ct2 int8 2x1": ("ct2", "int8", 2)}
PAIRS = (("mtkit fp32", "ct2 float32"), ("mtkit fp32 2x1", "ct2 float32 2x1"), ("mtkit fp32", "ct2 float32 2x1"),
         ("mtkit bf16", "ct2 int8"), ("mtkit bf16", "ct2 int8 2x1"))
TIMING = re.compile(r"translated (\d+) lines in ([\d.]+)s")


def export_models(run_dir: Path, threads: int) -> dict[str, Path]:
    """`mtkit export` with float32 and int8 weights (each CTranslate2 compute type runs its own export)."""
    exports = {}
    for name, quantization in (("float32", None), ("int8", "int8")):
        out = OUT / f"export-{name}"
        cmd = mtkit_command() + ["export", str(run_dir), "--to", "ctranslate2", "--out", str(out), "--json"]
        cmd += ["--quantization", quantization] if quantization else []
        check_run(run_timed(cmd, thread_env(threads), OUT / f"export-{name}.log"), f"mtkit export ({name})")
        exports[name] = out
    return exports


def program_command(name: str, setting: str, run_dir: Path, exports: dict[str, Path], source: Path, hyp: Path, threads: int) -> list[str]:
    engine, precision, at_once = PROGRAMS[name]
    if engine == "mtkit":
        cmd = mtkit_command() + ["translate", str(run_dir), "--beam", "4", "--batch-tokens", str(BATCH_TOKENS),
                                 "--dtype", precision, "-i", str(source), "-o", str(hyp)]
        cmd += ["--workers", str(at_once)]
        return cmd + (["--length-penalty", "0"] if setting == "matched" else [])
    return [sys.executable, str(CT2_PROGRAM), str(exports[precision]), str(source), str(hyp), "--compute-type", precision,
            "--threads", str(threads), "--inter-threads", str(at_once), "--settings", setting, "--batch-tokens",
            str(BATCH_TOKENS)]


def run_program(name: str, setting: str, round_no: int, cmd: list[str], hyp: Path, threads: int, count_tokens) -> dict:
    """One whole-process run: its own decode timing from its log line, wall and peak RSS from /usr/bin/time."""
    tag = f"{name.replace(' ', '-')}-{setting}-r{round_no}"
    run = run_timed(cmd, thread_env(threads), OUT / f"{tag}.log")
    check_run(run, f"{name} ({setting})")
    found = TIMING.search(run.stderr)
    lines = hyp.read_text(encoding="utf-8").split("\n")[:-1]
    seconds = float(found.group(2)) if found else run.wall_s
    tokens = count_tokens(lines)
    return {"round": round_no, "decode_s": round(seconds, 2), "sent_per_s": round(len(lines) / seconds, 1),
            "tgt_tok_per_s": round(tokens / seconds), "tgt_tokens": tokens, "whole_process_s": round(run.wall_s, 2),
            "peak_rss_mib": finite(run.peak_rss_mib, 0), "hyps": lines}


def mean_of(rounds: list[dict], key: str) -> float | None:
    values = [r[key] for r in rounds if r[key] is not None]
    return round(statistics.fmean(values), 2) if values else None


def summarize_program(rounds: list[dict]) -> dict:
    keys = ("sent_per_s", "tgt_tok_per_s", "decode_s", "whole_process_s", "peak_rss_mib")
    return {"mean": {k: mean_of(rounds, k) for k in keys}, "tgt_tokens": rounds[0]["tgt_tokens"],
            "same_output_every_round": all(r["hyps"] == rounds[0]["hyps"] for r in rounds),
            "rounds": [{k: v for k, v in r.items() if k != "hyps"} for r in rounds]}


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def summarize_pair(ours: list[dict], theirs: list[dict]) -> dict:
    """Per-round ratios mtkit / CTranslate2 (speed: above 1 is mtkit faster; time and memory: below 1 is)."""
    per_round = [{"round": a["round"], "sent_per_s": ratio(a["sent_per_s"], b["sent_per_s"]),
                  "tgt_tok_per_s": ratio(a["tgt_tok_per_s"], b["tgt_tok_per_s"]),
                  "whole_process_s": ratio(a["whole_process_s"], b["whole_process_s"]),
                  "peak_rss_mib": ratio(a["peak_rss_mib"], b["peak_rss_mib"])} for a, b in zip(ours, theirs)]
    keys = ("sent_per_s", "tgt_tok_per_s", "whole_process_s", "peak_rss_mib")
    same = sum(x == y for x, y in zip(ours[0]["hyps"], theirs[0]["hyps"]))
    return {"per_round": per_round, "mean": {k: mean_of(per_round, k) for k in keys},
            "identical_lines": same, "lines": len(ours[0]["hyps"])}


def run_rounds(run_dir: Path, exports: dict[str, Path], source: Path, args: argparse.Namespace, count_tokens) -> dict:
    """Alternating rounds: every program at every setting once per round, so drift hits all of them alike."""
    runs: dict[str, dict[str, list[dict]]] = {s: {name: [] for name in PROGRAMS} for s in SETTINGS}
    for round_no in range(1, args.rounds + 1):
        for setting in SETTINGS:
            for name in PROGRAMS:
                hyp = OUT / f"{name.replace(' ', '-')}-{setting}.hyp"
                cmd = program_command(name, setting, run_dir, exports, source, hyp, args.threads)
                result = run_program(name, setting, round_no, cmd, hyp, args.threads, count_tokens)
                runs[setting][name].append(result)
                print(f"round {round_no} {setting:8} {name:11} {result['sent_per_s']:7.1f} sent/s "
                      f"{result['tgt_tok_per_s']:6d} tok/s  whole {result['whole_process_s']:6.2f} s  "
                      f"{result['peak_rss_mib']} MiB", file=sys.stderr)
    return {setting: {"programs": {name: summarize_program(r) for name, r in programs.items()},
                      "pairs": {f"{a} / {b}": summarize_pair(programs[a], programs[b]) for a, b in PAIRS}}
            for setting, programs in runs.items()}


def markdown(report: dict) -> str:
    """The results as two markdown tables per setting: programs (means), pairs (per-round ratios)."""
    out = [f"Same model: `{report['model']}` exported to CTranslate2 {report['ctranslate2']}; {report['lines']} lines "
           f"of test_2016_flickr, beam 4, {report['threads']} threads, {report['rounds']} alternating rounds, "
           f"{report['date']}, commit {report['commit']}.", ""]
    for setting, result in report["settings"].items():
        out += [f"**{setting}**", "", "| program | sent/s | tgt tok/s | decode s | whole process s | peak RSS MiB | same output every round |",
                "|---|---|---|---|---|---|---|"]
        for name, p in result["programs"].items():
            m = p["mean"]
            out.append(f"| {name} | {m['sent_per_s']} | {m['tgt_tok_per_s']} | {m['decode_s']} | {m['whole_process_s']} "
                       f"| {m['peak_rss_mib']} | {p['same_output_every_round']} |")
        out += ["", "| pair (mtkit / CTranslate2) | sent/s | tgt tok/s | whole process | peak RSS | per-round sent/s | identical lines |",
                "|---|---|---|---|---|---|---|"]
        for name, pair in result["pairs"].items():
            m, rounds = pair["mean"], ", ".join(str(r["sent_per_s"]) for r in pair["per_round"])
            out.append(f"| {name} | {m['sent_per_s']}x | {m['tgt_tok_per_s']}x | {m['whole_process_s']}x | "
                       f"{m['peak_rss_mib']}x | {rounds} | {pair['identical_lines']} / {pair['lines']} |")
        out.append("")
    return "\n".join(out)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="RUN_DIR or checkpoint (default: bench-out/train-bf16, else train)")
    parser.add_argument("--train-steps", type=int, default=100, help="updates when a model must be trained")
    parser.add_argument("--train-minutes", type=float, default=0.0, help="or this long (reuses bench_translate's run)")
    parser.add_argument("--lines", type=int, help="translate only the first N test lines (default all 1000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    import ctranslate2  # the optional extra: fail here, before any work, when it is missing

    from mtkit.tokenizer import Tokenizer

    run_dir = ensure_model(args.model, args.train_steps, args.train_minutes, args.threads, "cpu")
    OUT.mkdir(parents=True, exist_ok=True)
    exports = export_models(run_dir, args.threads)
    source, lines, _ = read_test_set(args.lines)
    tokenizer = Tokenizer.load(exports["float32"] / "spm.model")  # the run's own sentencepiece model

    def count_tokens(hyps: list[str]) -> int:  # the same count for both engines: output pieces, no end token
        return sum(len(t) for t in tokenizer.encode(hyps))

    settings = run_rounds(run_dir, exports, source, args, count_tokens)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    report = {"model": str(run_dir), "ctranslate2": ctranslate2.__version__, "lines": len(lines), "rounds": args.rounds,
              "threads": args.threads, "batch_tokens": BATCH_TOKENS, "commit": commit,
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "settings": settings}
    (OUT / "results.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (OUT / "results.md").write_text(markdown(report) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2) if args.json else markdown(report))


if __name__ == "__main__":
    main()
