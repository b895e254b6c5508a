"""Checkpoint saving at the paper's scale, through the training loop's own save (train.Run.save).

Builds the run a recipe describes (default: recipes/wmt14-en-de/big.toml, vocabulary of DATA's manifest) with
train.start_run, gives Adam its state with one step on random gradients, then saves `--saves` times, `--interval`
steps apart (the weights nudged between saves, so an average of them is not one of them). For each save it
measures the seconds the call blocks training (the host snapshot; the loop writes in the background) and the
seconds until the file is on disk; the peak RSS of each save (VmHWM, reset before each save) against the RSS
before it; and at the end the files and bytes the run keeps (keep_last full checkpoints, the rest of the
averaging window weights-only). With `--average K`, `mtkit average RUN --last K` then runs in a fresh process
under /usr/bin/time -v: its wall time and peak RSS.

  python benchmarks/rehearsal_checkpoints.py --data DATA --run RUN --saves 20 --interval 600 --average 20 --json
  python benchmarks/rehearsal_checkpoints.py --data DATA --run /tmp/smoke --arch tiny --saves 6 --average 5  # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from mtkit.checkpoint import CHECKPOINT_DIR, list_checkpoints  # noqa: E402

RECIPE = ROOT / "recipes" / "wmt14-en-de" / "big.toml"


def rss_kib(field: str) -> int:
    """VmRSS (now) or VmHWM (peak since the last reset) of this process, KiB."""
    with open("/proc/self/status") as handle:
        return int(re.search(rf"{field}:\s+(\d+)", handle.read()).group(1))


def reset_peak_rss() -> bool:
    """Start a new VmHWM window (Linux: `5` into clear_refs); False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def build_run(data: Path, run_dir: Path, recipe_path: Path, arch: str | None, sets: list[str]):
    """The run of `recipe_path` on DATA's vocabulary, as `mtkit train` starts it, on the CPU."""
    from mtkit.data import read_manifest
    from mtkit.distributed import setup_distributed
    from mtkit.recipe import resolve_recipe
    from mtkit.train import start_run

    manifest = read_manifest(data)
    recipe = resolve_recipe(recipe_path, arch, ["train.device=cpu", *sets], vocab_size=manifest["vocab_size"])
    ctx = setup_distributed("cpu")
    run, _ = start_run(data, run_dir, recipe, manifest, ctx)
    return run


def fill_adam_state(run) -> None:
    """One optimizer step on random gradients: Adam's two moments exist, as after any real update."""
    generator = torch.Generator().manual_seed(0)
    for param in run.model.parameters():
        param.grad = torch.randn(param.shape, generator=generator, dtype=param.dtype) * 1e-3
    run.optimizer.step()
    run.optimizer.zero_grad(set_to_none=True)


def wait_for_writes(run) -> None:
    """Block until the checkpoint write the run started is on disk, pruning included."""
    run.saver.wait()


def timed_saves(run, saves: int, interval: int, disk: Path) -> list[dict]:
    """`saves` saves at steps interval, 2 interval, ...; per save: blocking s, s until written, RSS (MiB)."""
    rows = []
    generator = torch.Generator().manual_seed(1)
    for k in range(1, saves + 1):
        with torch.no_grad():  # a small, different nudge per save: averaging them is then not a no-op
            for param in run.model.parameters():
                param.add_(torch.randn(param.shape, generator=generator, dtype=param.dtype), alpha=1e-4)
        run.state.step = k * interval
        rss_before = rss_kib("VmRSS")
        hwm_ok = reset_peak_rss()
        start = time.perf_counter()
        run.save()
        blocking = time.perf_counter() - start
        wait_for_writes(run)
        written = time.perf_counter() - start
        rows.append({
            "step": run.state.step, "blocking_s": round(blocking, 3), "written_s": round(written, 3),
            "rss_before_mib": round(rss_before / 1024), "peak_rss_mib": round(rss_kib("VmHWM") / 1024) if hwm_ok else None,
            "files": len(list_checkpoints(run.run_dir)), "disk_free_gib": round(shutil.disk_usage(disk).free / 2**30, 1),
        })
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        if k == 1:
            check_disk(run.run_dir, saves - 1)
    return rows


def check_disk(run_dir: Path, more: int) -> None:
    """Stop before the disk fills: `more` further saves need at most the first save's bytes each."""
    first = list_checkpoints(run_dir)[-1].stat().st_size
    free = shutil.disk_usage(run_dir).free
    need = int(first * more * 1.05)
    if need > free:
        raise SystemExit(f"{run_dir}: {more} more checkpoints of up to {first / 2**30:.2f} GiB need "
                         f"{need / 2**30:.1f} GiB, only {free / 2**30:.1f} GiB free; use --run on a larger disk")


def kept_files(run_dir: Path) -> dict:
    """Files and bytes under RUN/checkpoints (what the run keeps for resuming and averaging)."""
    files = sorted((run_dir / CHECKPOINT_DIR).glob("*.pt"))
    sizes = {path.name: path.stat().st_size for path in files}
    return {"files": len(files), "bytes": sum(sizes.values()), "gib": round(sum(sizes.values()) / 2**30, 2),
            "sizes_mib": {name: round(size / 2**20, 1) for name, size in sizes.items()}}


def timed_average(run_dir: Path, last: int) -> dict:
    """`mtkit average RUN --last K` in a fresh process under /usr/bin/time -v: wall s, peak RSS MiB."""
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "mtkit", "average", str(run_dir), "--last", str(last)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"mtkit average failed: {done.stderr[-2000:]}")
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    clock = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", done.stderr).group(1)
    seconds = sum(float(part) * 60**i for i, part in enumerate(reversed(clock.split(":"))))
    newest = list_checkpoints(run_dir)[-1].stat().st_size
    return {"last": last, "wall_s": round(seconds, 1), "peak_rss_mib": round(peak / 1024),
            "newest_checkpoint_mib": round(newest / 2**20), "average_mib": round((run_dir / "average.pt").stat().st_size / 2**20)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="DATA_DIR of mtkit preprocess (its vocabulary is used)")
    parser.add_argument("--run", type=Path, required=True, help="RUN_DIR to create (must not exist)")
    parser.add_argument("--config", type=Path, default=RECIPE, help="recipe (default recipes/wmt14-en-de/big.toml)")
    parser.add_argument("--arch", help="model preset instead of the recipe's (tiny for a smoke test)")
    parser.add_argument("--saves", type=int, default=20, help="saves to make (default 20: big's averaging window)")
    parser.add_argument("--interval", type=int, default=600, help="steps between saves (big.toml's cadence)")
    parser.add_argument("--average", type=int, default=0, help="then time `mtkit average RUN --last K` (0: no)")
    parser.add_argument("--set", dest="sets", action="append", default=[], help="recipe override section.key=value")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.run.exists():
        parser.error(f"{args.run} exists; give a new --run")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    sets = [f"train.save_interval_steps={args.interval}", "train.save_interval_minutes=0",
            *([f"train.average_last={args.average}"] if args.average else []), *args.sets]
    run = build_run(args.data, args.run, args.config, args.arch, sets)
    fill_adam_state(run)
    params = sum(p.numel() for p in run.model.parameters())
    rows = timed_saves(run, args.saves, args.interval, args.run)
    report = {
        "recipe": str(args.config), "arch": run.model.cfg.__dict__, "parameters": params,
        "train": {k: getattr(run.cfg, k) for k in ("keep_last", "average_last", "save_interval_steps")},
        "saves": rows, "first_save": rows[0], "kept": kept_files(args.run),
        "blocking_s_median": sorted(r["blocking_s"] for r in rows)[len(rows) // 2],
        "written_s_median": sorted(r["written_s"] for r in rows)[len(rows) // 2],
        "peak_rss_mib_max": max((r["peak_rss_mib"] or 0) for r in rows),
        "rss_before_first_save_mib": rows[0]["rss_before_mib"],
    }
    if args.average:
        report["average"] = timed_average(args.run, args.average)
    text = (f"{params / 1e6:.1f}M parameters; save blocks {report['blocking_s_median']} s (median of {len(rows)}), "
            f"written after {report['written_s_median']} s; peak RSS while saving {report['peak_rss_mib_max']} MiB "
            f"(before: {report['rss_before_first_save_mib']} MiB); kept {report['kept']['files']} files, "
            f"{report['kept']['gib']} GiB")
    if args.average:
        a = report["average"]
        text += f"; mtkit average --last {a['last']}: {a['wall_s']} s, peak RSS {a['peak_rss_mib']} MiB"
    print(json.dumps(report) if args.json else text)


if __name__ == "__main__":
    main()
