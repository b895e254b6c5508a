"""Training speed on the "multi30k-small" workload, measured exactly like the peers' Measure A.

Trains N updates (default 300) per precision through `mtkit train` in a subprocess under /usr/bin/time -v,
then reports src+tgt tokens/s over updates 51..N from metrics.jsonl wall stamps, peak RSS, loss at steps
100/200/300, and achieved model GFLOP/s against a matmul peak measured in the same run.
Usage: python benchmarks/bench_train.py [--updates N] [--precision fp32,bf16] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH_OUT = ROOT / "bench-out"
RECIPE = ROOT / "recipes" / "multi30k-en-de" / "small.toml"
SHIPPED = ROOT / "data" / "multi30k"
FALLBACK = Path("/work/shared/data/multi30k")
PEERS = Path(os.environ.get("PEERS", Path.home() / ".cache" / "mtkit-peers"))
LOSS_STEPS = (100, 200, 300)
# The peers' "multi30k-small" workload (issue 7) is fixed, whatever the demo recipe later tuned for its 15 minutes.
WORKLOAD = {"max_tokens": 4096, "warmup_steps": 1000, "lr": 1e-3}  # and model.dropout 0.1
SKIP_UPDATES = 50  # the peers time updates 51..N: the first 50 include start-up and allocator warm-up


@dataclass
class TimedRun:
    """A finished subprocess: exit code, whole-process wall, peak RSS and CPU seconds (/usr/bin/time -v)."""

    returncode: int
    wall_s: float
    peak_rss_mib: float
    cpu_s: float
    stderr: str


def multi30k_dir() -> Path:
    """The shipped Multi30k copy, or the shared one until the lead ships it."""
    return SHIPPED if (SHIPPED / "train.en.gz").is_file() else FALLBACK


def thread_env(threads: int) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}


def mtkit_command() -> list[str]:
    return [sys.executable, "-m", "mtkit"]


def parse_time_v(text: str) -> tuple[float, float, float]:
    """(wall s, peak RSS MiB, CPU s) from /usr/bin/time -v output."""
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
    clock = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text).group(1)
    wall = 0.0
    for part in clock.split(":"):
        wall = wall * 60 + float(part)
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", text).group(1))
    system = float(re.search(r"System time \(seconds\): ([\d.]+)", text).group(1))
    return wall, rss_kb / 1024, user + system


def run_timed(cmd: list[str], env: dict[str, str], log_path: Path, stdout_path: Path | None = None) -> TimedRun:
    """Run `cmd` under /usr/bin/time -v; stderr goes to log_path (the time report is kept apart)."""
    time_path = log_path.with_suffix(".time")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    wrapped = ["/usr/bin/time", "-v", "-o", str(time_path)] + cmd if Path("/usr/bin/time").exists() else cmd
    start = time.monotonic()
    with open(log_path, "w") as err, open(stdout_path or os.devnull, "w") as out:
        code = subprocess.call(wrapped, env=env, stdout=out, stderr=err, cwd=ROOT)
    wall = time.monotonic() - start
    stderr = log_path.read_text(errors="replace")
    if wrapped is cmd or not time_path.is_file():
        return TimedRun(code, wall, float("nan"), float("nan"), stderr)
    wall, rss, cpu = parse_time_v(time_path.read_text())
    return TimedRun(code, wall, rss, cpu, stderr)


def check_run(run: TimedRun, what: str) -> None:
    if run.returncode != 0:
        tail = "\n".join(run.stderr.splitlines()[-15:])
        raise SystemExit(f"{what} failed with exit code {run.returncode}:\n{tail}")


def prepare_data(out: Path = BENCH_OUT / "data", fresh: bool = False) -> Path:
    """Preprocess the workload once (joint BPE 8000); later runs reuse bench-out/data."""
    if (out / "manifest.json").is_file() and not fresh:
        return out
    if out.exists():
        shutil.rmtree(out)
    src = multi30k_dir()
    cmd = mtkit_command() + [
        "preprocess", "--source-lang", "en", "--target-lang", "de", "--train", str(src / "train"),
        "--valid", str(src / "val"), "--test", str(src / "test_2016_flickr"), "--vocab-size", "8000",
        "--workers", "2", "--out", str(out),
    ]
    print(f"preprocessing {src} -> {out}", file=sys.stderr)
    check_run(run_timed(cmd, thread_env(2), BENCH_OUT / "preprocess.log"), "mtkit preprocess")
    return out


def matmul_gflops(dtype_name: str, threads: int, seconds: float, device: str = "cpu") -> float:
    """Sustained torch.matmul GFLOP/s of n x n matrices (2 n^3 FLOPs each): n 2048 on CPU threads, 8192 on GPU."""
    import torch

    torch.set_num_threads(threads)
    n = 8192 if device == "cuda" else 2048
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    out = torch.empty(n, n, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(2):  # warm-up: thread pool, oneDNN / cuBLAS kernel selection
        torch.matmul(a, b, out=out)
    sync()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        torch.matmul(a, b, out=out)
        sync()
        count += 1
    return 2 * n**3 * count / (time.perf_counter() - start) / 1e9


@dataclass
class FlopModel:
    """Per-token training FLOPs of the model, split by the side whose tokens drive them."""

    per_src_token: float
    per_tgt_token: float
    matmul_weights: int  # weights that multiply activations (biases and norms left out), tied embedding once
    non_embedding_matmul_weights: int


def attention_keys(data_dir: Path) -> tuple[float, float, float]:
    """Token-weighted mean keys per query: encoder self, decoder self (causal), cross; from the train split.

    A sentence of L tokens costs L^2 key visits in self-attention, so per token the mean is sum L^2 / sum L.
    """
    import numpy as np

    from mtkit.data import ParallelData, read_manifest

    manifest = read_manifest(data_dir)
    data = ParallelData.open(data_dir, "train", manifest["source_lang"], manifest["target_lang"])
    src = data.src_lens.astype(np.float64) + 1  # + eos
    tgt = data.tgt_lens.astype(np.float64) + 1  # bos + tokens (decoder input)
    return (src**2).sum() / src.sum(), (tgt * (tgt + 1) / 2).sum() / tgt.sum(), (tgt * src).sum() / tgt.sum()


def corpus_tokens(data_dir: Path) -> dict[str, int]:
    """Train-split tokens with one eos per sentence and side (peers' spm: 443,037 en / 457,331 de)."""
    from mtkit.data import ParallelData, read_manifest

    manifest = read_manifest(data_dir)
    data = ParallelData.open(data_dir, "train", manifest["source_lang"], manifest["target_lang"])
    return {"sentences": len(data), "src": int(data.src_lens.sum()) + len(data), "tgt": int(data.tgt_lens.sum()) + len(data)}


def flop_model(data_dir: Path, arch: str | None) -> FlopModel:
    """Model FLOPs per non-pad token for one training update (forward + backward = 3x forward).

    Forward, per token, 2 FLOPs per weight it meets; training triples it:
      src token: 6 * (L_enc * (4 D^2 + 2 D F)  +  L_dec * 2 D^2)         encoder layers + cross-attention K/V
      tgt token: 6 * (L_dec * (6 D^2 + 2 D F)  +  D V)                   decoder layers + output projection
    plus attention scores and weighted sums, 3 * 4 D * keys per token and layer (QK^T and AV, 2 D each):
      src: L_enc * keys_enc;  tgt: L_dec * (keys_causal + keys_cross).
    Padding, softmax, norms and embedding lookups are not counted (model FLOPs, as in MFU).
    """
    from mtkit.data import read_manifest
    from mtkit.recipe import resolve_recipe

    cfg = resolve_recipe(RECIPE, arch, [], vocab_size=read_manifest(data_dir)["vocab_size"]).model
    d, f, v = cfg.d_model, cfg.d_ff, cfg.vocab_size
    enc_layer, dec_layer, cross_kv = 4 * d * d + 2 * d * f, 6 * d * d + 2 * d * f, 2 * d * d
    keys_enc, keys_causal, keys_cross = attention_keys(data_dir)
    per_src = 6 * (cfg.encoder_layers * enc_layer + cfg.decoder_layers * cross_kv)
    per_src += 12 * d * cfg.encoder_layers * keys_enc
    per_tgt = 6 * (cfg.decoder_layers * dec_layer + d * v) + 12 * d * cfg.decoder_layers * (keys_causal + keys_cross)
    non_embedding = cfg.encoder_layers * enc_layer + cfg.decoder_layers * (dec_layer + cross_kv)
    return FlopModel(per_src, per_tgt, non_embedding + v * d, non_embedding)


def read_metrics(run_dir: Path) -> list[dict]:
    """The per-update training records of metrics.jsonl (validation and skip records left out)."""
    path = run_dir / "metrics.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in records if "loss" in r and "tgt_tokens" in r]


def measure_window(records: list[dict], first: int, last: int) -> dict:
    """Peers' Measure A: tokens of updates first..last over the time from update first-1's stamp to last's."""
    by_step = {r["step"]: r for r in records}
    missing = [s for s in (first - 1, last) if s not in by_step]
    if missing:
        raise SystemExit(f"metrics.jsonl lacks updates {missing}: was train.log_interval=1 applied?")
    window = [by_step[s] for s in range(first, last + 1) if s in by_step]
    seconds = by_step[last]["wall"] - by_step[first - 1]["wall"]
    src, tgt = sum(r["src_tokens"] for r in window), sum(r["tgt_tokens"] for r in window)
    return {
        "window": [first, last], "n": len(window), "seconds": round(seconds, 2), "src_tokens": src, "tgt_tokens": tgt,
        "src_tgt_tok_per_s": round((src + tgt) / seconds, 1), "tgt_tok_per_s": round(tgt / seconds, 1),
        "s_per_update": round(seconds / len(window), 3), "tgt_tok_per_update": round(tgt / len(window)),
    }


def variant(args: argparse.Namespace) -> str:
    """Empty for the workload itself; other devices, sizes or options name their run directories and curves."""
    parts = (args.arch, args.device if args.device != "cpu" else None,
             f"{args.max_tokens}tok" if args.max_tokens else None, "compile" if args.compile else None)
    return "".join(f"{part}-" for part in parts if part)


def train_once(data_dir: Path, precision: str, args: argparse.Namespace) -> tuple[TimedRun, list[dict], Path]:
    """A fresh `mtkit train` run of args.updates updates; returns the timing and its per-update records."""
    run_dir = BENCH_OUT / f"train-{variant(args)}{precision}"
    if run_dir.exists():
        shutil.rmtree(run_dir)  # a leftover run would be resumed, not retrained
    options = {"precision": precision, "device": args.device, "log_interval": 1, "max_time_minutes": 0,
               "save_interval_minutes": 0, **WORKLOAD, "max_tokens": args.max_tokens or WORKLOAD["max_tokens"],
               "compile": args.compile or None}
    cmd = mtkit_command() + ["train", str(data_dir), "--save-dir", str(run_dir), "--config", str(RECIPE)]
    cmd += [x for key, value in options.items() if value is not None for x in ("--set", f"train.{key}={value}")]
    cmd += ["--set", "model.dropout=0.1"]
    cmd += (["--arch", args.arch] if args.arch else []) + ["--max-steps", str(args.updates), "--json"]
    print(f"training {args.updates} updates in {precision} on {args.device} ({args.threads} threads) -> {run_dir}",
          file=sys.stderr)
    run = run_timed(cmd, thread_env(args.threads), run_dir.with_suffix(".log"))
    check_run(run, f"mtkit train ({precision})")
    return run, read_metrics(run_dir), run_dir


def finite(value: float, digits: int) -> float | None:
    """Rounded, or None where /usr/bin/time was missing (NaN)."""
    return round(value, digits or None) if math.isfinite(value) else None


def summarize(precision: str, run: TimedRun, records: list[dict], flops: FlopModel, peaks: dict, updates: int) -> dict:
    first = SKIP_UPDATES + 1 if updates > 2 * SKIP_UPDATES else updates // 2 + 1  # short smoke runs: 2nd half
    result = {"precision": precision, "updates": updates, **measure_window(records, first, updates)}
    model_flops = flops.per_src_token * result["src_tokens"] + flops.per_tgt_token * result["tgt_tokens"]
    achieved = model_flops / result["seconds"] / 1e9
    loss = {r["step"]: r["loss"] for r in records}
    result.update({
        "gflop_per_update": round(model_flops / result["n"] / 1e9, 1),
        "achieved_gflops": round(achieved, 1),
        "pct_of_peak": round(100 * achieved / peaks[precision], 1),  # against the same dtype's matmul peak
        "pct_of_fp32_peak": round(100 * achieved / peaks["fp32"], 1),
        "peak_rss_mib": finite(run.peak_rss_mib, 0), "process_wall_s": round(run.wall_s, 1),
        "cpu_s": finite(run.cpu_s, 1), "avg_cores": finite(run.cpu_s / max(run.wall_s, 1e-9), 2),
        "loss_at": {str(s): loss[s] for s in LOSS_STEPS if s in loss},
        "final_loss": loss.get(updates),
    })
    return result


def fairseq_losses(peers: Path) -> dict[int, float]:
    """fairseq's per-update loss from $PEERS/runs/fairseq/A.log, converted from bits to nats (x ln 2)."""
    path = peers / "runs" / "fairseq" / "A.log"
    if not path.is_file():
        return {}
    losses: dict[int, float] = {}
    for line in path.read_text(errors="replace").splitlines():
        step, loss = re.search(r"num_updates=(\d+)", line), re.search(r"\bloss=([\d.]+)", line)
        if step and loss and "train_inner" in line:
            losses.setdefault(int(step.group(1)), round(float(loss.group(1)) * math.log(2), 4))
    return losses


def write_loss_curves(curves: dict[str, dict[int, float]], tag: str) -> Path:
    """One TSV per curve (step, loss) and loss-curves{tag}.tsv with every curve side by side (nats)."""
    for name, curve in curves.items():
        lines = [f"{s}\t{v}" for s, v in sorted(curve.items())]
        (BENCH_OUT / f"loss-{name}.tsv").write_text("step\tloss\n" + "\n".join(lines) + "\n")
    names = list(curves)
    steps = sorted({s for curve in curves.values() for s in curve})
    rows = ["\t".join(["step"] + names)]
    rows += ["\t".join([str(s)] + [str(curves[n].get(s, "")) for n in names]) for s in steps]
    path = BENCH_OUT / f"loss-curves{tag}.tsv"
    path.write_text("\n".join(rows) + "\n")
    return path


def peers_line(result: dict) -> str:
    """The same line the peers' `benchutil.py speed` prints, for a direct diff against A.result."""
    first, last = result["window"]
    return (f"updates={first}-{last} n={result['n']} seconds={result['seconds']:.2f} src_tok={result['src_tokens']} "
            f"tgt_tok={result['tgt_tokens']} src+tgt_tok/s={result['src_tgt_tok_per_s']:.0f} "
            f"tgt_tok/s={result['tgt_tok_per_s']:.0f} s/update={result['s_per_update']:.3f} "
            f"tgt_tok/update={result['tgt_tok_per_update']}")


def print_text(report: dict) -> None:
    peaks = report["matmul_peak_gflops"]
    print(f"matmul peak on {report['threads']} threads: fp32 {peaks['fp32']:.0f} GFLOP/s, bf16 {peaks['bf16']:.0f} GFLOP/s")
    for r in report["runs"]:
        print(f"== mtkit {r['precision']}")
        print(peers_line(r))
        print(f"peak_rss_mib={r['peak_rss_mib']} wall_s={r['process_wall_s']} cpu_s={r['cpu_s']} avg_cores={r['avg_cores']}")
        print(f"model GFLOP/update={r['gflop_per_update']} achieved={r['achieved_gflops']} GFLOP/s "
              f"= {r['pct_of_peak']}% of {r['precision']} matmul peak; loss at {r['loss_at']} final {r['final_loss']}")
    print(f"loss curves: {report['loss_curves']}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=300, help="updates per run (peers: 300)")
    parser.add_argument("--precision", default="fp32,bf16", help="comma-separated: fp32, bf16")
    parser.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of the runs and the matmul peak")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (train.device)")
    parser.add_argument("--arch", help="model preset instead of the recipe's small (e.g. base, big on a GPU)")
    parser.add_argument("--max-tokens", type=int, help="train.max_tokens instead of the workload's 4096")
    parser.add_argument("--compile", action="store_true", help="train.compile=True (torch.compile)")
    parser.add_argument("--matmul-seconds", type=float, default=3.0, help="seconds per matmul peak measurement")
    parser.add_argument("--peers", type=Path, default=PEERS, help="peer runs root (fairseq A.log for the loss curve)")
    parser.add_argument("--fresh-data", action="store_true", help="preprocess again instead of reusing bench-out/data")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.updates < 4:
        parser.error("--updates must be at least 4")
    if not set(args.precision.split(",")) <= {"fp32", "bf16"}:
        parser.error("--precision takes fp32 and/or bf16 (the matmul peaks are measured for those)")
    return args


def main() -> None:
    args = parse_args()
    tag = variant(args)
    data_dir = prepare_data(fresh=args.fresh_data)
    peaks = {p: round(matmul_gflops(p, args.threads, args.matmul_seconds, args.device), 1) for p in ("fp32", "bf16")}
    flops = flop_model(data_dir, args.arch)
    runs, curves = [], {}
    for precision in [p.strip() for p in args.precision.split(",") if p.strip()]:
        run, records, run_dir = train_once(data_dir, precision, args)
        runs.append({**summarize(precision, run, records, flops, peaks, args.updates), "run_dir": str(run_dir)})
        curves[f"mtkit-{tag}{precision}"] = {r["step"]: r["loss"] for r in records}
    if not tag and (fairseq := fairseq_losses(args.peers)):  # fairseq ran the CPU workload only
        curves["fairseq-fp32"] = fairseq
    report = {
        "workload": f"multi30k-small{' with ' + tag.rstrip('-') if tag else ''}", "device": args.device,
        "threads": args.threads, "matmul_peak_gflops": peaks,
        "model": {"matmul_weights": flops.matmul_weights, "non_embedding_matmul_weights": flops.non_embedding_matmul_weights,
                  "train_flop_per_src_token": round(flops.per_src_token),
                  "train_flop_per_tgt_token": round(flops.per_tgt_token)},
        "train_corpus_tokens": corpus_tokens(data_dir), "runs": runs,
        "loss_curves": str(write_loss_curves(curves, f"-{tag.rstrip('-')}" if tag else "")),
        "loss_unit": "nats per target token (fairseq's bits x ln 2)",
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_text(report)


if __name__ == "__main__":
    main()
