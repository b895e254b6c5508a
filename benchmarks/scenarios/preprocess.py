"""Preprocessing speed: `mtkit preprocess` of Multi30k en-de (29,000 train pairs, BPE 8,000) with 1 and 2 workers,
its corpus filters off, all on, and on but the language filter (the default); seconds per million pairs are the whole
process's wall time scaled from these 29,000 pairs (start-up and sentencepiece training included)."""

from __future__ import annotations

import argparse
import shutil

from harness import WORK, alternate, checked, figures, measure, medians, ratios, write_results

from scenarios.workload import preprocess_command

PAIRS = 29000
FILTERS = {  # name -> the flags that choose them
    "filters off": ["--no-filter-same", "--no-filter-scripts"],
    "filters on": ["--filter-langid"],
    "filters on but language": [],  # the defaults
}


def run(args: argparse.Namespace) -> None:
    def program(workers: int, filters: str):
        def once(round_: int) -> dict[str, float]:
            name = f"preprocess-{workers}-{filters.replace(' ', '-')}"
            out = WORK / name
            shutil.rmtree(out, ignore_errors=True)
            command = preprocess_command(out, workers) + FILTERS[filters]
            m = checked(measure(command, WORK / "logs" / name), "preprocess")
            return {
                **figures(m),
                "pairs_per_s": round(PAIRS / m.wall_s, 1),
                "s_per_million_pairs": round(m.wall_s * 1e6 / PAIRS, 1),
            }

        return once

    chosen = [
        (1, "filters off"),
        (1, "filters on"),
        (2, "filters off"),
        (2, "filters on"),
        (2, "filters on but language"),
    ]
    programs = {
        f"{workers} worker{'s' if workers > 1 else ''}, {filters}": program(workers, filters)
        for workers, filters in chosen
    }
    results = alternate(programs, args.rounds)
    rel = ratios(results)
    rows = [
        {"program": f"mtkit preprocess, {name}", **medians(r), "wall vs 1 worker, filters off": rel[name]["wall_s"]}
        for name, r in results.items()
    ]
    write_results("preprocess", {"rounds": results}, rows)
