"""The GPU benchmark of `make gpu-check`: the paper's models at the paper's batch in bf16, and newstest-sized
translation. Writes bench.json (after every stage), bench.md and summary.md (with the GPU tests' outcomes when
tests.xml / tests.jsonl are in --out) under --out. A stage that fails is reported and the next one runs.

Stages:
  data       a synthetic corpus (make_synthetic_corpus.py: --pairs pairs, each two Multi30k train pairs joined,
             ~25 words a side), valid = 3,000 joined val pairs, test = 3,000 joined test_2016_flickr + val pairs
             (newstest2014 has 3,003 sentences), preprocessed with recipes/wmt14-en-de/base.toml's settings
             (`mtkit preprocess --config`: vocabulary 37,000, max_len 256, max_ratio 1.5)
  model      bench_model.py for base and big: forward+backward alone on a synthetic micro-batch (6,144 tokens a side)
  train      the real training loop in this process (mtkit.training.loop.train) with
             recipes/wmt14-en-de/{base,big}.toml: 6,250 tokens x update_freq 4 (the paper's ~25,000 per update), bf16;
             base eager, big eager, base compiled; tokens/s over updates 51..N from metrics.jsonl, MFU against the bf16
             matmul peak measured here (flops.matmul_gflops, 8192^3), peak GPU memory (torch.cuda.max_memory_allocated)
  translate  the base run of `train` (its lr warm-up shortened so a short run translates), beam 4, the 3,000
             test sentences in bf16 and fp32 at the recipe's batch size; sent/s, target tokens/s, BLEU against
             the joined references, peak GPU memory
On an H200 (2026-11-28, BENCHMARKS.md "GPU") the data stage took 11-15 s, model 27 s, the base and big runs 68 and
47 s at 1 and 0.5 minutes' caps, and the compiled run's first update 184 s (compiling for each new batch shape),
hence its 4.5-minute cap: all stages at the defaults should come to about 10 minutes (summed from those times;
never run at the defaults). `--stages` and `--runs` split the
work over several commands (--work keeps the data and runs between them). --smoke runs every stage on the CPU with
toy sizes to check the harness.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
import traceback
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import bench_model
import torch
from flops import flop_model, matmul_gflops, measure_window, read_metrics
from harness import ROOT
from harness import WORK as BENCH_OUT

RECIPES = ROOT / "recipes" / "wmt14-en-de"
PREPROCESS_RECIPE = RECIPES / "base.toml"
STAGES = ("data", "model", "train", "translate")
# The paper's per-GPU throughput (src+tgt tokens/s on one P100): 8 GPUs did ~25,000 + 25,000 tokens per step in
# 0.4 s (base) and 1.0 s (big), section 5.2. `x paper P100` is one GPU's measured throughput over this.
PAPER_P100_TOK_PER_S = {"base": 50_000 / 8 / 0.4, "big": 50_000 / 8 / 1.0}


def run_quiet(cmd: list[str]) -> str:
    """A subprocess from the project root; its stderr passes through, its stdout is returned."""
    print(f"$ {' '.join(cmd)}", file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=checkout_env()).stdout


def checkout_env() -> dict[str, str]:
    """This checkout first on PYTHONPATH, what was there kept (a machine may carry mtkit's dependencies there)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def stage_data(args: argparse.Namespace) -> dict:
    corpus = args.work / "corpus"
    maker = [sys.executable, str(Path(__file__).with_name("make_synthetic_corpus.py")), "--out", str(corpus)]
    made = json.loads(run_quiet(maker + ["--prefix", "train", "--pairs", str(args.pairs), "--seed", "1"]))
    run_quiet(maker + ["--prefix", "valid", "--pairs", str(args.valid_pairs), "--splits", "val", "--seed", "2"])
    run_quiet(
        maker + ["--prefix", "test", "--pairs", str(args.lines), "--splits", "test_2016_flickr,val", "--seed", "3"]
    )
    if args.data.exists():
        import shutil

        shutil.rmtree(args.data)  # preprocess refuses to overwrite another corpus's data
    start = time.perf_counter()
    vocab = ["--vocab-size", str(args.vocab)] if args.vocab else []  # default: the recipe's 37,000
    manifest = json.loads(
        run_quiet(
            [
                sys.executable,
                "-m",
                "mtkit",
                "preprocess",
                "--config",
                str(PREPROCESS_RECIPE),
                "--train",
                str(corpus / "train"),
                "--valid",
                str(corpus / "valid"),
                *vocab,
                "--workers",
                str(args.workers),
                "--out",
                str(args.data),
                "--json",
            ]
        )
    )
    return {
        "pairs": args.pairs,
        "mean_words": made["mean_words"],
        "vocab": manifest["vocab_size"],
        "test_lines": args.lines,
        "preprocess_s": round(time.perf_counter() - start, 1),
        "workers": args.workers,
    }


def stage_model(args: argparse.Namespace) -> dict:
    """Model-only forward+backward (bench_model.py), the micro-batch of the recipes: what the loop adds shows."""
    rows = {}
    for preset in args.archs:
        options = [
            "--device",
            args.device,
            "--preset",
            preset,
            "--vocab",
            str(args.vocab or 37000),
            "--sentences",
            "192",
            "--src-len",
            "32",
            "--tgt-len",
            "32",
            "--steps",
            "10" if not args.smoke else "1",
            "--warmup",
            "3",
        ]
        report = bench_model.run(bench_model.parse_args(options))
        rows[preset] = report
        print(json.dumps(report["results"]), file=sys.stderr, flush=True)
    return rows


def train_overrides(
    args: argparse.Namespace, steps: int, minutes: float, compiled: bool, translate_model: bool
) -> list[str]:
    sets = [
        f"train.device={args.device}",
        "train.precision=bf16",
        "train.log_interval=1",
        "train.save_interval_steps=0",
        "train.save_interval_minutes=0",
        "train.valid_interval_steps=0",
        "train.average_last=1",
        f"train.max_steps={steps}",
        f"train.max_time_minutes={minutes}",
        f"train.compile={compiled}",
    ]
    if translate_model:  # the recipe's 4,000-step warm-up would leave a 2-minute run untrained (throughput unchanged)
        sets += ["train.lr_schedule=inverse_sqrt", "train.lr=7e-4", "train.warmup_steps=600"]
    return sets + args.train_sets


def one_training(
    args: argparse.Namespace, name: str, arch: str, steps: int, minutes: float, compiled: bool, peak_gflops: float
) -> dict:
    """One in-process `mtkit train` run; throughput over its steady updates, MFU, peak GPU memory."""
    from mtkit.corpus.binarized import read_manifest
    from mtkit.recipe import resolve_recipe
    from mtkit.training.loop import train

    if not (args.data / "manifest.json").is_file():
        raise RuntimeError(f"{args.data}: no preprocessed data; run the data stage first")
    run_dir = args.work / f"train-{name}"
    if run_dir.exists():
        import shutil

        shutil.rmtree(run_dir)  # a leftover run would be resumed, not measured
    recipe = resolve_recipe(
        RECIPES / f"{arch}.toml",
        args.arch_override,
        train_overrides(args, steps, minutes, compiled, name == "base"),
        vocab_size=read_manifest(args.data)["vocab_size"],
    )
    reset_gpu_memory(args.device)
    start = time.perf_counter()
    summary = train(args.data, run_dir, recipe)
    wall = time.perf_counter() - start
    records = read_metrics(run_dir)
    updates = len(records)
    result = {
        "preset": args.arch_override or arch,
        "compiled": compiled,
        "max_tokens": recipe.train.max_tokens,
        "update_freq": recipe.train.update_freq,
        "updates": updates,
        "stop": summary["stop"],
        "process_s": round(wall, 1),
        "run_dir": str(run_dir),
        **gpu_memory(args.device),
    }
    if updates < 4:
        return {**result, "note": "too few updates to measure"}
    first = updates // 2 + 1 if compiled or updates <= 100 else 51  # compiled: recompiles settle in the first half
    window = measure_window(records, first, updates)
    flops = flop_model(args.data, args.arch_override or arch)
    achieved = (flops.per_src_token * window["src_tokens"] + flops.per_tgt_token * window["tgt_tokens"]) / window[
        "seconds"
    ]
    result.update(window)
    result.update(
        {
            "model_tflops": round(achieved / 1e12, 2),
            "mfu": round(achieved / (peak_gflops * 1e9), 4),
            "first_update_wall_s": records[0]["wall"],
        }
    )
    if arch in PAPER_P100_TOK_PER_S and not args.smoke:
        result["x_paper_p100"] = round(window["src_tgt_tok_per_s"] / PAPER_P100_TOK_PER_S[arch], 1)
    return result


def stage_train(args: argparse.Namespace, report: dict) -> dict:
    peak = report["matmul_peak_gflops"]["bf16"]
    runs = {}
    for name, arch, steps, minutes, compiled in args.train_runs:
        print(
            f"== train {name}: {arch}, <= {steps} updates or {minutes} min, compile={compiled}",
            file=sys.stderr,
            flush=True,
        )
        runs[name] = guarded(functools.partial(one_training, args, name, arch, steps, minutes, compiled, peak))
        print(json.dumps(runs[name]), file=sys.stderr, flush=True)
    return runs


def guarded(work) -> dict:
    """work()'s result, or {"error": ...} with the traceback printed: one failed part must not stop the others."""
    try:
        return work()
    except Exception as exc:  # noqa: BLE001  (a report, not a program: every failure is recorded and shown)
        traceback.print_exc()
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}


def stage_translate(args: argparse.Namespace) -> dict:
    """The base run's average.pt on the test lines: speed, BLEU against the joined references, memory."""
    from mtkit.engines.torch_engine import TorchTranslator
    from mtkit.score import score

    run_dir = args.work / "train-base"
    if not (run_dir / "average.pt").is_file():
        raise RuntimeError(f"{run_dir}: no trained base run; run the train stage first")
    corpus = args.work / "corpus"
    lines = (corpus / "test.en").read_text(encoding="utf-8").splitlines()
    refs = (corpus / "test.de").read_text(encoding="utf-8").splitlines()
    rows = []

    def one(dtype: str) -> dict:
        translator = TorchTranslator.load(run_dir, device=args.device, dtype=dtype, beam=4)
        translator.translate(lines[:32])  # warm-up: kernels, allocator
        reset_gpu_memory(args.device)
        start = time.perf_counter()
        hyps = translator.translate(lines)
        synchronize(args.device)
        seconds = time.perf_counter() - start
        tokens = sum(len(ids) for ids in translator.tokenizer.encode(hyps))
        return {
            "dtype": dtype,
            "batch_tokens": translator.cfg.batch_tokens,
            "beam": translator.cfg.beam,
            "lines": len(lines),
            "seconds": round(seconds, 2),
            "sent_per_s": round(len(lines) / seconds, 1),
            "tgt_tok_per_s": round(tokens / seconds),
            "bleu": round(score(hyps, [refs]).bleu, 2),
            "fp32_matmul": fp32_matmul_mode(),
            **gpu_memory(args.device),
        }

    for dtype in args.translate_dtypes:
        rows.append({"dtype": dtype, **guarded(functools.partial(one, dtype))})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return {"model": str(run_dir / "average.pt"), "runs": rows}


def reset_gpu_memory(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def gpu_memory(device: str) -> dict:
    if device != "cuda":
        return {}
    return {
        "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
        "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 2),
    }


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def fp32_matmul_mode() -> str:
    """torch>=2.9's fp32_precision ("ieee"/"tf32"), else the legacy setting; never the legacy allow_tf32 flag,
    whose read raises once the new API has been used."""
    return getattr(torch.backends.cuda.matmul, "fp32_precision", None) or torch.get_float32_matmul_precision()


def machine(device: str) -> dict:
    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "cpu_cores": os.cpu_count(), "device": device}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(
            {
                "gpu": props.name,
                "gpu_memory_gib": round(props.total_memory / 2**30, 1),
                "multiprocessors": props.multi_processor_count,
                "capability": ".".join(map(str, torch.cuda.get_device_capability(0))),
                "bf16_supported": torch.cuda.is_bf16_supported(),
                "fp32_matmul": fp32_matmul_mode(),
            }
        )
        try:
            smi = ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,power.limit", "--format=csv,noheader"]
            info["nvidia_smi"] = subprocess.run(smi, capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    return info


def markdown(report: dict) -> str:
    """The benchmark's tables, for BENCHMARKS.md; a failed stage or run shows its error."""
    m = report["machine"]
    peak = report.get("matmul_peak_gflops", {})
    lines = [
        f"GPU benchmark on {m.get('gpu', m['device'])} (torch {m['torch']}, CUDA {m['cuda']}, capability "
        f"{m.get('capability', '-')}, fp32 matmul {m.get('fp32_matmul', '-')}); bf16 matmul peak "
        f"{peak.get('bf16', 0) / 1e3:.0f} TFLOP/s measured (8192^3)"
        f"{' (SMOKE: CPU, toy sizes)' if report['smoke'] else ''}",
        "",
    ]
    for name in STAGES:
        if isinstance(report.get(name), dict) and "error" in report[name]:
            lines += [f"Stage {name} FAILED: {report[name]['error']}", ""]
    if "pairs" in report.get("data", {}):
        d = report["data"]
        lines += [
            f"Data: {d['pairs']:,} synthetic pairs (two Multi30k pairs joined; mean words {d['mean_words']}), "
            f"vocabulary {d['vocab']:,}, preprocessed in {d['preprocess_s']} s with {d['workers']} workers",
            "",
        ]
    if "model" in report and "error" not in report["model"]:
        lines += [
            "| model only (bench_model.py) | dtype | ms/step | tgt tok/s | TFLOP/s | MFU |",
            "|---|---|---|---|---|---|",
        ]
        for preset, r in report["model"].items():
            for row in r["results"]:
                lines.append(
                    f"| {preset} {row['model']} | {row['dtype']} | {row['step_s'] * 1e3:.1f} "
                    f"| {row['tgt_tokens_per_s']:,.0f} | {row['tflops']:.1f} | {row.get('mfu', 0):.1%} |"
                )
        lines.append("")
    if "train" in report and "error" not in report["train"]:
        lines += [
            "| mtkit train, bf16 | tokens/update | updates (window) | src+tgt tok/s | s/update | TFLOP/s | MFU "
            "| x paper P100 | peak GPU GiB (alloc / reserved) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for name, r in report["train"].items():
            if "window" not in r:
                lines.append(
                    f"| {name} | | {r.get('updates', '-')} "
                    f"| {r.get('note') or 'FAILED: ' + r.get('error', '?')} | | | | | |"
                )
                continue
            lines.append(
                f"| {name} ({r['max_tokens']} x {r['update_freq']}) | {r['tgt_tok_per_update']:,} tgt "
                f"| {r['updates']} ({r['window'][0]}-{r['window'][1]}) | {r['src_tgt_tok_per_s']:,.0f} "
                f"| {r['s_per_update']} | {r['model_tflops']} | {r['mfu']:.1%} | {r.get('x_paper_p100', '-')} "
                f"| {r.get('peak_allocated_gib', '-')} / {r.get('peak_reserved_gib', '-')} |"
            )
        lines.append("")
    if "translate" in report and "error" not in report["translate"]:
        lines += [
            "| translate (base run, beam 4) | batch tokens | sent/s | tgt tok/s | s | BLEU | peak GPU GiB |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in report["translate"]["runs"]:
            if "error" in r:
                lines.append(f"| {r['dtype']} | FAILED: {r['error']} | | | | | |")
                continue
            lines.append(
                f"| {r['lines']:,} lines {r['dtype']} | {r['batch_tokens']:,} | {r['sent_per_s']} "
                f"| {r['tgt_tok_per_s']:,} | {r['seconds']} | {r['bleu']} | {r.get('peak_allocated_gib', '-')} |"
            )
    return "\n".join(lines) + "\n"


def tests_markdown(out: Path) -> str:
    """The outcome of every GPU test (junit XML of pytest) and the figures the tests recorded (JSONL)."""
    xml, jsonl = out / "tests.xml", out / "tests.jsonl"
    if not xml.is_file():
        return ""
    rows, counts = [], {}
    for case in ElementTree.parse(xml).getroot().iter("testcase"):
        outcome, detail = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome, detail = (
                    {"failure": "FAILED", "error": "ERROR", "skipped": "skipped"}[child.tag],
                    child.get("message", ""),
                )
        counts[outcome] = counts.get(outcome, 0) + 1
        detail = " ".join(detail.split())[:200].replace("|", "/")
        rows.append(f"| {case.get('name')} | {outcome} | {float(case.get('time', 0)):.1f} | {detail} |")
    lines = [
        "GPU tests (tests/gpu): " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())),
        "",
        "| test | outcome | s | message |",
        "|---|---|---|---|",
        *rows,
        "",
    ]
    if jsonl.is_file():
        lines += ["Figures the tests recorded:", "", "```", *jsonl.read_text().splitlines(), "```", ""]
    return "\n".join(lines)


def write_summary(out: Path) -> Path:
    """summary.md: the tests' outcomes and the benchmark's tables, what goes into BENCHMARKS.md with the GPU's name and
    the date."""
    bench = out / "bench.md"
    text = tests_markdown(out) + (bench.read_text() if bench.is_file() else "")
    path = out / "summary.md"
    path.write_text(text or "nothing ran: no tests.xml or bench.md under this directory\n")
    return path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("GPU_CHECK_OUT", BENCH_OUT / "gpu-check")))
    parser.add_argument(
        "--work", type=Path, default=BENCH_OUT / "gpu-work", help="corpus, data, runs (not under --out)"
    )
    parser.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated subset of {','.join(STAGES)}")
    parser.add_argument(
        "--summary-only", action="store_true", help="only (re)write --out/summary.md from what is there"
    )
    parser.add_argument("--pairs", type=int, default=200_000, help="synthetic training pairs")
    parser.add_argument("--lines", type=int, default=3000, help="test sentences to translate")
    parser.add_argument("--valid-pairs", type=int, default=3000, help="validation pairs (newstest2013 has 3,000)")
    parser.add_argument("--vocab", type=int, default=None, help="vocabulary (default: the recipe's 37,000)")
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument(
        "--base-minutes", type=float, default=1.5, help="base eager: time cap (also the translation model)"
    )
    parser.add_argument("--base-steps", type=int, default=1500)
    parser.add_argument("--big-minutes", type=float, default=1.0)
    parser.add_argument("--big-steps", type=int, default=300)
    parser.add_argument("--compile-minutes", type=float, default=4.5)
    parser.add_argument("--compile-steps", type=int, default=400)
    parser.add_argument(
        "--runs", default="base,big,base-compiled", help="comma-separated subset of the training runs (train stage)"
    )
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a recipe override for every training run, after the benchmark's own (e.g. train.max_tokens=25000)",
    )
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny model, toy sizes: checks the harness only")
    args = parser.parse_args(argv)
    args.stages = [s for s in args.stages.split(",") if s]
    if unknown := set(args.stages) - set(STAGES):
        parser.error(f"unknown stages {sorted(unknown)}")
    args.device, args.arch_override, args.archs, args.train_sets = "cuda", None, ["base", "big"], list(args.sets)
    if args.smoke:
        args.device, args.arch_override, args.archs = "cpu", "tiny", ["tiny"]
        args.pairs, args.lines, args.vocab, args.workers, args.valid_pairs = 2000, 60, 1000, 2, 200
        args.base_steps = args.big_steps = args.compile_steps = 6
        args.train_sets = ["train.max_tokens=1000", "train.update_freq=2", *args.sets]
    elif not torch.cuda.is_available() and not args.summary_only:
        parser.error("no CUDA device (use --smoke to check the harness on the CPU)")
    args.train_runs = [
        ("base", "base", args.base_steps, args.base_minutes, False),
        ("big", "big", args.big_steps, args.big_minutes, False),
        ("base-compiled", "base", args.compile_steps, args.compile_minutes, True),
    ]
    runs = [r for r in args.runs.split(",") if r]
    if unknown := set(runs) - {run[0] for run in args.train_runs}:
        parser.error(f"unknown runs {sorted(unknown)}")
    if args.smoke:
        runs = [r for r in runs if r != "base-compiled"]  # torch.compile on a CPU needs minutes and a C++ compiler
    args.train_runs = [run for run in args.train_runs if run[0] in runs]
    args.translate_dtypes = ["bf16", "fp32"]
    args.data = args.work / "data"
    return args


def failed(value: object) -> bool:
    """Whether a stage's result holds an error anywhere (a failed stage, training run or translation)."""
    if isinstance(value, dict):
        return "error" in value or any(failed(v) for v in value.values())
    if isinstance(value, list):
        return any(failed(v) for v in value)
    return False


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.summary_only:
        print(write_summary(args.out).read_text())
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "machine": machine(args.device),
        "smoke": args.smoke,
        "options": {k: str(v) for k, v in vars(args).items()},
    }
    threads = int(os.environ.get("OMP_NUM_THREADS", "4"))
    # MFU's denominator: what torch.matmul sustains in bf16 on this device (all runs here train in bf16).
    report["matmul_peak_gflops"] = {
        "bf16": round(matmul_gflops("bf16", threads, 0.5 if args.smoke else 3.0, args.device), 1)
    }
    stages = {
        "data": stage_data,
        "model": stage_model,
        "train": lambda a: stage_train(a, report),
        "translate": stage_translate,
    }
    for name in args.stages:
        start = time.perf_counter()
        report[name] = guarded(functools.partial(stages[name], args))
        report.setdefault("stage_s", {})[name] = round(time.perf_counter() - start, 1)
        (args.out / "bench.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
        print(
            f"== {name}: {report['stage_s'][name]} s{' FAILED' if failed(report[name]) else ''}",
            file=sys.stderr,
            flush=True,
        )
    (args.out / "bench.md").write_text(markdown(report))
    print(write_summary(args.out).read_text())
    return 1 if any(failed(report[name]) for name in args.stages) else 0


if __name__ == "__main__":
    sys.exit(main())
