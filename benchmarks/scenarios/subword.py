"""Subword regularization (BPE-dropout, `train.subword_alpha`) against none on Multi30k en-de at several budgets.

Two runs of recipes/multi30k-en-de/small.toml on the same preprocessed data, alpha 0 and --alpha (both sides).
Each is trained to the first budget of --budgets, averaged over its last 3 checkpoints and scored, then resumed
(mtkit's exact resume) to the next budget and scored again, so the figure at 15 minutes is that of a 15-minute
run: the recipe's inverse-square-root schedule does not depend on the budget. The two runs take turns, budget by
budget, so that drift of the machine falls on both. Scored: the validation set (on which settings are chosen) and
test_2016_flickr, torch engine, beam 4 with the recipe's length penalty, sacreBLEU.

Everything lives in bench-out/subword/; a (run, budget) already scored is reused, so a killed run goes on.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness import WORK, checked, measure, write_results

from scenarios.multilingual import BILINGUAL, bleu, updates
from scenarios.workload import MULTI30K, mtkit

OUT = WORK / "subword"
SPLITS = {"valid": "val", "test": "test_2016_flickr"}


def data() -> Path:
    out = OUT / "data"
    if not (out / "manifest.json").is_file():
        files = [
            "--train",
            str(MULTI30K / "train"),
            "--valid",
            str(MULTI30K / "val"),
            "--test",
            str(MULTI30K / "test_2016_flickr"),
        ]
        checked(
            measure(mtkit("preprocess", "--config", str(BILINGUAL), *files, "--out", str(out)), OUT / "preprocess"),
            "preprocess",
        )
    return out


def scored(data_dir: Path, alpha: float, minutes: float) -> dict:
    """The row of the alpha run trained (or resumed) to `minutes`, averaged and scored; reused once written."""
    base = OUT / f"alpha-{alpha:g}"
    row_file = base / f"{minutes:g}-min.json"
    if row_file.is_file():
        return json.loads(row_file.read_text(encoding="utf-8"))
    run = base / "run"
    tag = f"{minutes:g}min"
    checked(
        measure(
            mtkit(
                "train",
                str(data_dir),
                "--save-dir",
                str(run),
                "--config",
                str(BILINGUAL),
                "--max-time",
                str(minutes),
                "--set",
                f"train.subword_alpha={alpha!r}",
            ),
            base / f"train-{tag}",
        ),
        "train",
    )
    checked(measure(mtkit("average", str(run), "--last", "3"), base / f"average-{tag}"), "average")
    row = {
        "training": f"BPE-dropout {alpha:g}" if alpha else "no subword regularization",
        "minutes": minutes,
        "updates": updates(run),
        **{f"{name} sacreBLEU": bleu(run, "de", False, out=OUT, split=s, tag=tag) for name, s in SPLITS.items()},
    }
    row_file.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return row


def run(args: argparse.Namespace) -> None:
    data_dir = data()
    budgets = sorted(float(b) for b in args.budgets.split(","))
    rows = [scored(data_dir, alpha, minutes) for minutes in budgets for alpha in (0.0, args.alpha)]
    write_results("subword", {"budgets_minutes": budgets, "alpha": args.alpha, "recipe": str(BILINGUAL.name)}, rows)
