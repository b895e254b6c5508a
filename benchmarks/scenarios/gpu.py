"""The GPU entry: benchmarks/gpu_check.sh (the CUDA tests, then benchmarks/bench_gpu_check.py), as `make gpu-check`
runs it. Without CUDA it prints one line and exits 0; its results go to bench-out/gpu-check/summary.md."""

from __future__ import annotations

import argparse
import subprocess
import sys

from harness import ROOT


def run(args: argparse.Namespace) -> None:
    sys.exit(subprocess.call(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "all"], cwd=ROOT))
