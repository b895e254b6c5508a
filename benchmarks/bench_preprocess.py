"""Preprocess throughput and memory: Multi30k train repeated to N pairs, --workers 1 and 2.

Reports pairs/s/worker and peak RSS (main process; whole tree polled from /proc) at N/4, N/2, N to show
flat memory. spm is trained once and reused: runs time read + encode + clean + write. Target >= 40,000
pairs/s/worker. Repeated text flatters the word cache: a cold cache encodes at half the warm speed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MULTI30K = ROOT / "data" / "multi30k"
LANGS = ("en", "de")


def write_repeated(prefix: Path, pairs: int) -> None:
    """PREFIX.en / PREFIX.de with Multi30k train repeated (and cut) to `pairs` lines."""
    for lang in LANGS:
        with gzip.open(MULTI30K / f"train.{lang}.gz", "rb") as handle:
            block = handle.read()
        lines = block.count(b"\n")
        with open(f"{prefix}.{lang}", "wb") as out:
            for _ in range(pairs // lines):
                out.write(block)
            out.write(b"".join(block.splitlines(keepends=True)[: pairs % lines]))


def train_model(work: Path, vocab_size: int) -> tuple[Path, float]:
    from mtkit.files import read_lines
    from mtkit.tokenizer import train_tokenizer

    start = time.perf_counter()
    sentences = (line for lang in LANGS for line in read_lines(MULTI30K / f"train.{lang}.gz"))
    path = train_tokenizer(sentences, work / "spm.model", vocab_size)
    return path, time.perf_counter() - start


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and all its descendants."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/statm") as handle:
                total += int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    stack.extend(int(child) for child in handle.read().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def run_child(prefix: Path, model: Path, out: Path, workers: int, dedup: bool) -> dict:
    """One preprocess run in a fresh interpreter, its process tree polled every 20 ms."""
    args = [sys.executable, __file__, "--child", str(prefix), str(model), str(out), str(workers), str(int(dedup))]
    child = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    peak = 0
    while child.poll() is None:
        peak = max(peak, tree_rss(child.pid))
        time.sleep(0.02)
    stdout = child.stdout.read()
    if child.returncode != 0:
        raise SystemExit(f"preprocess child failed with exit code {child.returncode}")
    result = json.loads(stdout)
    result["peak_rss_tree_mb"] = round(peak / 2**20, 1)
    return result


def child_main(prefix: str, model: str, out: str, workers: str, dedup: str) -> None:
    from mtkit.preprocess import PreprocessConfig, preprocess

    cfg = PreprocessConfig("en", "de", train=prefix, spm_model=model, workers=int(workers), dedup=bool(int(dedup)))
    start = time.perf_counter()
    manifest = preprocess(cfg, Path(out))
    elapsed = time.perf_counter() - start
    pairs = manifest["splits"]["train"]["input_pairs"]
    print(json.dumps({
        "pairs": pairs,
        "workers": int(workers),
        "seconds": round(elapsed, 2),
        "pairs_per_s": round(pairs / elapsed),
        "pairs_per_s_per_worker": round(pairs / elapsed / int(workers)),
        "peak_rss_main_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_000_000, help="largest corpus size")
    parser.add_argument("--sizes", type=int, default=3, help="also run at pairs/2, pairs/4, ... (this many sizes)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--dedup", action="store_true", help="also deduplicate (repeated data: almost all dropped)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()
    sizes = sorted(args.pairs >> i for i in range(args.sizes))
    with tempfile.TemporaryDirectory(prefix="bench-preprocess-") as tmp:
        work = Path(tmp)
        model, spm_seconds = train_model(work, args.vocab_size)
        runs = []
        for size in sizes:
            prefix = work / f"corpus{size}"
            write_repeated(prefix, size)
            for workers in args.workers:
                runs.append(run_child(prefix, model, work / f"out{size}-{workers}", workers, args.dedup))
                if not args.json:
                    print(json.dumps(runs[-1]), file=sys.stderr)
            for lang in LANGS:
                os.unlink(f"{prefix}.{lang}")
    report = {"spm_train_seconds": round(spm_seconds, 2), "vocab_size": args.vocab_size, "runs": runs}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"sentencepiece training on Multi30k (vocab {args.vocab_size}): {spm_seconds:.1f} s")
    print(f"{'pairs':>9} {'workers':>7} {'seconds':>8} {'pairs/s':>9} {'/worker':>9} {'main MB':>8} {'tree MB':>8}")
    for run in runs:
        print(
            f"{run['pairs']:>9} {run['workers']:>7} {run['seconds']:>8} {run['pairs_per_s']:>9} "
            f"{run['pairs_per_s_per_worker']:>9} {run['peak_rss_main_mb']:>8} {run['peak_rss_tree_mb']:>8}"
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(*sys.argv[2:])
    else:
        main()
