"""The WMT14 rehearsal on this CPU (issue 14): everything of a paper-scale run that needs no GPU, at full size.

Steps (each command in a fresh process under /usr/bin/time -v: wall and peak RSS; preprocess also polls the RSS
of its whole process tree, workers included):
  preprocess  synthetic corpora (benchmarks/make_synthetic_corpus.py) of each --sizes N (default 1M and 4.5M)
              preprocessed with recipes/wmt14-en-de/base.toml's [preprocess] settings (`mtkit preprocess
              --config`: vocabulary 37,000, max_len 256, max_ratio 1.5) and 2 workers; a line through the
              sizes predicts 40.8M pairs (WMT14 en-fr)
  train       `base` as recipes/wmt14-en-de/base.toml has it (batch 6,250 x 4, bf16) for --updates updates on
              the largest corpus: seconds per update, whole process (start-up, last validation, save, average),
              peak RSS
  save        `big` (the vocabulary of the smallest corpus, 37,000): 20 saves through the training loop's own
              save, 600 steps apart (benchmarks/rehearsal_checkpoints.py): seconds a save blocks, its peak RSS
  average     `mtkit average RUN --last 20` over those 20 checkpoints: wall, peak RSS, the disk the run keeps
Heavy: run alone on a quiet machine (~25 GB of disk under --work). `--smoke` runs every step at toy sizes
(2,000 / 4,000 pairs, vocabulary 1,000, the `tiny` model, 3 saves) to prove the harness works.

  python benchmarks/rehearsal.py                    # all steps; bench-out/rehearsal/results.{json,md}
  python benchmarks/rehearsal.py --steps preprocess,train
  python benchmarks/rehearsal.py --steps save,average --work /big/disk/rehearsal
  python benchmarks/rehearsal.py --sizes 10000,20000 --vocab 2000 --arch tiny --steps preprocess,train  # minutes
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_preprocess import tree_rss  # noqa: E402  (sibling scripts)
from bench_train import BENCH_OUT, ROOT, parse_time_v, read_metrics  # noqa: E402

HERE = Path(__file__).resolve().parent
BASE = ROOT / "recipes" / "wmt14-en-de" / "base.toml"
BIG = ROOT / "recipes" / "wmt14-en-de" / "big.toml"
EN_FR_PAIRS = 40_836_715  # WMT14 fr-en train (HF wmt/wmt14)
STEPS = ("preprocess", "train", "save", "average")
# Measured before issue 14 (its text), for the old-against-new lines of the report.
BEFORE = {"preprocess 4.5M": "1 min 28 s, 1.3 GB peak RSS, 11,418 pairs dropped by the ratio filter",
          "train": "base 6,250 x 4: about 29 s per update, 5.6 GB peak RSS, 1 min 28 s for 2 updates with start-up, "
                   "validation and the final average",
          "average": "5 big checkpoints (vocabulary 1,000, 2.13 GB each): 12.0 GB peak RSS"}


def timed(cmd: list[str], log: Path, poll_tree: bool = False) -> dict:
    """Run `cmd` under /usr/bin/time -v with OMP_NUM_THREADS=2; wall s, peak RSS MiB (+ process tree), stdout."""
    time_file = log.with_suffix(".time")
    env = {**os.environ, "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "PYTHONUNBUFFERED": "1"}
    print(f"$ {' '.join(cmd)}", file=sys.stderr, flush=True)
    with open(log, "w") as err:
        child = subprocess.Popen(["/usr/bin/time", "-v", "-o", str(time_file), *cmd], cwd=ROOT, env=env,
                                 stdout=subprocess.PIPE, stderr=err, text=True)
        peak = [0]
        poller = threading.Thread(target=poll_peak, args=(child, peak), daemon=True) if poll_tree else None
        if poller:
            poller.start()
        stdout = child.communicate()[0]
        if poller:
            poller.join()
    if child.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise SystemExit(f"failed ({child.returncode}): {' '.join(cmd)}\n{tail}")
    wall, rss, cpu = parse_time_v(time_file.read_text())
    result = {"wall_s": round(wall, 1), "peak_rss_mib": round(rss), "cpu_s": round(cpu, 1), "stdout": stdout}
    if poll_tree:
        result["peak_rss_tree_mib"] = round(peak[0] / 2**20)
    return result


def poll_peak(child: subprocess.Popen, peak: list[int]) -> None:
    """Largest summed RSS of the child's process tree, sampled every 50 ms until it exits."""
    while child.poll() is None:
        peak[0] = max(peak[0], tree_rss(child.pid))
        time.sleep(0.05)


def make_corpus(out: Path, prefix: str, pairs: int, splits: str, seed: int) -> dict:
    cmd = [sys.executable, str(HERE / "make_synthetic_corpus.py"), "--out", str(out), "--prefix", prefix,
           "--pairs", str(pairs), "--splits", splits, "--seed", str(seed)]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def step_preprocess(args: argparse.Namespace, work: Path, logs: Path) -> dict:
    """Corpus of each size, preprocessed with the recipe's settings; the fitted line predicts 40.8M pairs."""
    flags = ["--config", str(BASE.relative_to(ROOT)), *(["--vocab-size", str(args.vocab)] if args.vocab else [])]
    heldout = work / "heldout"  # newstest-sized valid (3,000) and test (3,003) sets, joined the same way
    make_corpus(heldout, "valid", 3000, "val", 2)
    make_corpus(heldout, "test", 3003, "test_2016_flickr", 3)
    runs = []
    for size in args.sizes:
        corpus = make_corpus(work / f"corpus-{size}", "train", size, "train", 1)
        out = work / f"data-{size}"
        shutil.rmtree(out, ignore_errors=True)
        cmd = [sys.executable, "-m", "mtkit", "preprocess", "--source-lang", "en", "--target-lang", "de",
               "--train", str(work / f"corpus-{size}" / "train"), "--valid", str(heldout / "valid"),
               "--test", str(heldout / "test"), "--workers", "2", *flags, "--out", str(out), "--json"]
        result = timed(cmd, logs / f"preprocess-{size}.log", poll_tree=True)
        manifest = json.loads(result.pop("stdout"))
        train = manifest["splits"]["train"]
        runs.append({"pairs": size, **result, "kept_pairs": train["pairs"], "dropped": train.get("dropped", {}),
                     "vocab": manifest["vocab_size"], "mean_words": corpus["mean_words"]})
        if not args.keep:
            shutil.rmtree(work / f"corpus-{size}")
    return {"flags": flags, "workers": 2, "runs": runs, "fit": fit_sizes(runs)}


def fit_sizes(runs: list[dict]) -> dict:
    """Least-squares lines wall = a + b N and RSS = a + b N through the sizes; their values at 40.8M pairs."""
    import numpy as np

    if len(runs) < 2:
        return {}
    sizes = np.array([r["pairs"] for r in runs], dtype=float)
    fit = {}
    for key in ("wall_s", "peak_rss_mib", "peak_rss_tree_mib"):
        slope, intercept = np.polyfit(sizes, [r[key] for r in runs], 1)
        fit[key] = {"per_million_pairs": round(slope * 1e6, 2), "at_zero": round(intercept, 1),
                    "at_40.8M_pairs": round(intercept + slope * EN_FR_PAIRS, 1)}
    return fit


def step_train(args: argparse.Namespace, work: Path, logs: Path) -> dict:
    """`base` as the recipe has it for --updates updates on the largest corpus (start-up, validation, save and
    average in the whole process's figures); seconds per update from metrics.jsonl's wall stamps."""
    run_dir = work / "train-base"
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [sys.executable, "-m", "mtkit", "train", str(work / f"data-{max(args.sizes)}"), "--save-dir", str(run_dir),
           "--config", str(BASE), "--max-steps", str(args.updates), "--set", "train.device=cpu",
           "--set", "train.log_interval=1", *(["--arch", args.arch] if args.arch else []), "--json"]
    result = timed(cmd, logs / "train-base.log")
    result.pop("stdout")
    records = read_metrics(run_dir)
    walls = [r["wall"] for r in records]
    # The first update's stamp includes start-up and the first allocations; the later ones are the step alone.
    per_update = [round(b - a, 2) for a, b in zip(walls, walls[1:])]
    return {**result, "arch": args.arch or "base", "updates": len(records), "first_update_wall_s": walls[0] if walls else None,
            "seconds_per_update": per_update, "tokens_per_update": [[r["src_tokens"], r["tgt_tokens"]] for r in records],
            "losses": [r["loss"] for r in records]}


def step_save(args: argparse.Namespace, work: Path, logs: Path) -> dict:
    """20 `big` saves through the training loop (rehearsal_checkpoints.py), 600 steps apart."""
    run_dir = work / "checkpoints-big"
    shutil.rmtree(run_dir, ignore_errors=True)
    free = shutil.disk_usage(work).free / 2**30
    print(f"{work}: {free:.1f} GiB free", file=sys.stderr)
    cmd = [sys.executable, str(HERE / "rehearsal_checkpoints.py"), "--data", str(work / f"data-{min(args.sizes)}"),
           "--run", str(run_dir), "--config", str(BIG), "--saves", str(args.saves), "--interval", "600", "--json",
           *(["--arch", args.arch] if args.arch else [])]
    result = timed(cmd, logs / "save-big.log")
    return {**result, **json.loads(result.pop("stdout")), "preset": args.arch or "big", "disk_free_before_gib": round(free, 1)}


def step_average(args: argparse.Namespace, work: Path, logs: Path) -> dict:
    """`mtkit average --last 20` over the saved run; disk before and after (average.pt included)."""
    run_dir = work / "checkpoints-big"
    if not (run_dir / "checkpoints").is_dir():
        raise SystemExit(f"{run_dir}: no checkpoints; run the save step first")
    cmd = [sys.executable, "-m", "mtkit", "average", str(run_dir), "--last", str(args.saves), "--json"]
    result = timed(cmd, logs / "average-big.log")
    used = json.loads(result.pop("stdout"))["checkpoints"]
    average = run_dir / "average.pt"
    kept = sum(p.stat().st_size for p in (run_dir / "checkpoints").glob("*.pt"))
    report = {**result, "checkpoints_averaged": len(used), "average_mib": round(average.stat().st_size / 2**20, 1),
              "checkpoints_kept_gib": round(kept / 2**30, 2)}
    if not args.keep:
        shutil.rmtree(run_dir)
    return report


def markdown(report: dict) -> str:
    """The tables for BENCHMARKS.md."""
    lines = [f"Rehearsal on {report['machine']}, OMP_NUM_THREADS=2{' (SMOKE: toy sizes)' if report['smoke'] else ''}.", ""]
    if "preprocess" in report:
        p = report["preprocess"]
        lines += [f"Preprocess ({' '.join(p['flags'])}, 2 workers):", "",
                  "| pairs | vocab | wall s | peak RSS MiB (main) | peak RSS MiB (tree) | kept | dropped |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['pairs']:,} | {r['vocab']:,} | {r['wall_s']} | {r['peak_rss_mib']:,} | {r['peak_rss_tree_mib']:,} | {r['kept_pairs']:,} | "
                  f"{', '.join(f'{k} {v:,}' for k, v in r['dropped'].items() if v) or 'none'} |" for r in p["runs"]]
        for key, fit in p["fit"].items():
            lines.append(f"- {key}: {fit['per_million_pairs']} per million pairs; at 40.8M pairs: {fit['at_40.8M_pairs']}")
        lines.append("")
    if "train" in report:
        t = report["train"]
        lines += [f"`{t['arch']}` at recipes/wmt14-en-de/base.toml's batch (6,250 x 4) on the CPU, {t['updates']} updates: "
                  f"seconds per update after the first {t['seconds_per_update']} (first stamped at {t['first_update_wall_s']} s), "
                  f"src/tgt tokens per update {t['tokens_per_update']}; whole process {t['wall_s']} s, "
                  f"peak RSS {t['peak_rss_mib']:,} MiB", ""]
    lines += ["Before issue 14 (its text): " + "; ".join(f"{k}: {v}" for k, v in BEFORE.items()), ""]
    if "save" in report:
        s = report["save"]
        lines += [f"`{s['preset']}` saves ({s['parameters'] / 1e6:.1f}M parameters, {len(s['saves'])} saves): a save blocks "
                  f"{s['blocking_s_median']} s (median; first {s['first_save']['blocking_s']} s), on disk after "
                  f"{s['written_s_median']} s; peak RSS while saving {s['peak_rss_mib_max']:,} MiB (before the first "
                  f"save {s['rss_before_first_save_mib']:,} MiB); whole process peak {s['peak_rss_mib']:,} MiB; "
                  f"the run keeps {s['kept']['files']} files, {s['kept']['gib']} GiB", ""]
    if "average" in report:
        a = report["average"]
        lines += [f"`mtkit average --last {a['checkpoints_averaged']}`: {a['wall_s']} s, peak RSS {a['peak_rss_mib']:,} MiB, "
                  f"average.pt {a['average_mib']} MiB, checkpoints on disk {a['checkpoints_kept_gib']} GiB", ""]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated subset of {','.join(STEPS)}")
    parser.add_argument("--work", type=Path, default=Path("/tmp/mtkit-rehearsal"), help="corpora, data, runs (~25 GB)")
    parser.add_argument("--out", type=Path, default=BENCH_OUT / "rehearsal", help="results.json, results.md, logs")
    parser.add_argument("--sizes", default="1000000,4500000", help="corpus sizes in pairs (comma-separated)")
    parser.add_argument("--vocab", type=int, default=None, help="vocabulary (default: the recipe's 37,000)")
    parser.add_argument("--arch", default=None, help="train step: another model than the recipe's base (e.g. tiny)")
    parser.add_argument("--updates", type=int, default=2, help="train step: updates to run (default 2)")
    parser.add_argument("--saves", type=int, default=20, help="big checkpoints to save and average (default 20)")
    parser.add_argument("--keep", action="store_true", help="keep the corpora and the checkpoints (tens of GB)")
    parser.add_argument("--smoke", action="store_true", help="toy sizes: proves the harness, measures nothing")
    args = parser.parse_args(argv)
    args.steps = [s for s in args.steps.split(",") if s]
    if unknown := set(args.steps) - set(STEPS):
        parser.error(f"unknown steps {sorted(unknown)}; valid: {', '.join(STEPS)}")
    args.sizes = [2000, 4000] if args.smoke else [int(s) for s in args.sizes.split(",")]
    if args.smoke:
        args.saves, args.vocab, args.arch = 3, 1000, "tiny"
    return args


def main(argv: list[str] | None = None) -> None:
    import platform

    args = parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    logs = args.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    steps = {"preprocess": step_preprocess, "train": step_train, "save": step_save, "average": step_average}
    report: dict = {"machine": f"{platform.node()} ({os.cpu_count()} cores)", "smoke": args.smoke, "sizes": args.sizes}
    results = args.out / ("results-smoke.json" if args.smoke else "results.json")
    for name in args.steps:
        start = time.monotonic()
        report[name] = steps[name](args, args.work, logs)
        print(f"== {name}: {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
        results.write_text(json.dumps(report, indent=2) + "\n")  # after every step: a later failure keeps these
    text = markdown(report)
    results.with_suffix(".md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
