"""Preprocessing speed: `mtkit preprocess` of Multi30k en-de (29,000 pairs, BPE 8,000) with 1 and 2 workers."""

from __future__ import annotations

import argparse
import shutil

from harness import WORK, alternate, checked, figures, measure, medians, ratios, write_results
from scenarios.workload import preprocess_command

PAIRS = 29000


def run(args: argparse.Namespace) -> None:
    def program(workers: int):
        def once(round_: int) -> dict[str, float]:
            out = WORK / f"preprocess-{workers}"
            shutil.rmtree(out, ignore_errors=True)
            m = checked(measure(preprocess_command(out, workers), WORK / "logs" / f"preprocess-{workers}"), "preprocess")
            return {**figures(m), "pairs_per_s": round(PAIRS / m.wall_s, 1)}
        return once

    results = alternate({"1 worker": program(1), "2 workers": program(2)}, args.rounds)
    rel = ratios(results)
    rows = [{"program": f"mtkit preprocess, {name}", **medians(r), "wall vs 1 worker": rel[name]["wall_s"]}
            for name, r in results.items()]
    write_results("preprocess", {"rounds": results}, rows)
