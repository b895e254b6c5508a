"""recipes/multi30k-en-de/ensemble.sh's order and resumption, with a stand-in for `python -m mtkit` that records each
command and writes the files the real one would: the ensemble is every seed's teacher, the length penalty is the one
of the best val score, nothing whole is done twice, and the student recipes read what the chain writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import ROOT

SCRIPT = ROOT / "recipes" / "multi30k-en-de" / "ensemble.sh"
VAL_BLEU = {"0.6": 39.1, "1.0": 39.8, "1.5": 40.2, "2.0": 40.2, "2.5": 40.1, "3.0": 39.9}  # a tie: the smaller

STAND_IN = r"""
import json, os, re, sys
from pathlib import Path
if sys.argv[1] == "-":  # the script's own Python (the length penalty's choice)
    sys.argv = sys.argv[1:]
    exec(sys.stdin.read())
    sys.exit(0)
args = sys.argv[3:]  # python -m mtkit COMMAND ...
with open(os.environ["MTKIT_LOG"], "a") as log:
    log.write(json.dumps(args) + "\n")
def after(flag):
    return args[args.index(flag) + 1]
command = args[0]
if command == "preprocess":
    Path(after("--out")).mkdir(parents=True, exist_ok=True)
    (Path(after("--out")) / "manifest.json").write_text("{}")
elif command == "train":
    Path(after("--save-dir")).mkdir(parents=True, exist_ok=True)
    (Path(after("--save-dir")) / "average.pt").write_text("")
elif command == "translate":
    Path(after("-o")).write_text("Ein Hund.\n")
elif command == "score":
    lp = re.search(r"val-([0-9.]+)\.de$", args[-1])
    print(json.dumps({"bleu": json.loads(os.environ["VAL_BLEU"])[lp.group(1)] if lp else 41.5, "lc_tok_bleu": 42.0}))
elif command == "distill":
    for lang in ("en", "de"):
        Path(after("--out") + "." + lang).write_text("x\n")
elif command == "clean-distilled":
    for lang in ("en", "de"):
        Path(after("--out") + "." + lang).write_text("x\n")
    print(json.dumps({"pairs": 1}))
elif command == "score-pairs":
    Path(after("-o")).write_text("{}\n")
elif command == "shortlist":
    (Path(args[1]) / "shortlist.txt").write_text("")
"""


def run_chain(tmp_path: Path, seeds: int, expect: int = 0, **extra: str) -> list[list[str]]:
    fake = tmp_path / "fake_python.py"
    fake.write_text(STAND_IN, encoding="utf-8")
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {fake} "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    log = tmp_path / "commands.jsonl"
    env = {
        **os.environ,
        "PY": str(wrapper),
        "OUT": str(tmp_path / "runs"),
        "SEEDS": str(seeds),
        "MTKIT_LOG": str(log),
        "VAL_BLEU": json.dumps(VAL_BLEU),
        **extra,
    }
    done = subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == expect, done.stderr
    assert expect == 0 or "made by an ensemble of 2 log-linear, not 4 log-linear" in done.stderr
    commands = [json.loads(line) for line in log.read_text().splitlines()]
    log.unlink()
    return commands


def test_the_chain_ensembles_every_seed_at_the_val_chosen_penalty_and_resumes(tmp_path: Path) -> None:
    first = run_chain(tmp_path, seeds=3)
    out = tmp_path / "runs"
    names = [c[0] for c in first]
    assert names[:4] == ["preprocess", "train", "train", "train"]
    assert [c[c.index("--set") + 1] for c in first[1:4]] == [f"train.seed={s}" for s in (1, 2, 3)]
    assert (out / "ensemble-of-3" / "length_penalty").read_text().strip() == "1.5"
    ensembles = [c for c in first if c[0] in ("translate", "distill")]
    assert len(ensembles) == 8  # 6 penalties on val, test, the distillation
    for c in ensembles:
        assert c[1] == str(out / "teacher-1")
        assert [c[i + 1] for i, a in enumerate(c) if a == "--ensemble"] == [str(out / f"teacher-{s}") for s in (2, 3)]
        assert c[c.index("--ensemble-mode") + 1] == "log-linear"
    assert ensembles[-2][ensembles[-2].index("--length-penalty") + 1] == "1.5"  # test and distill: the chosen one
    assert ensembles[-1][ensembles[-1].index("--length-penalty") + 1] == "1.5"
    assert json.loads((out / "ensemble-of-3" / "test.json").read_text())["bleu"] == 41.5
    students = [c[c.index("--save-dir") + 1] for c in first if c[0] == "train"][3:]
    assert students == [str(out / "student-ensemble"), str(out / "student-ensemble-deep")]
    assert [c[1] for c in first if c[0] == "shortlist"] == students
    again = [c[0] for c in run_chain(tmp_path, seeds=3)]
    assert "preprocess" not in again and "translate" not in again and "distill" not in again and "score" not in again
    assert again.count("train") == 5  # a finished run ends at once
    grid = "0.6 1.0 1.5 2.0 2.5 3.0 3.5"
    lower = json.dumps({**VAL_BLEU, "3.5": 40.0})
    grown = run_chain(tmp_path, seeds=3, STEPS="penalty", PENALTIES=grid, VAL_BLEU=lower)
    assert [c[0] for c in grown] == ["translate", "score"]  # 3.5, below 1.5 on val: the test stays 1.5's
    (out / "ensemble-of-3" / "val-3.5.json").unlink()  # val scores 3.5 again, higher now
    higher = json.dumps({**VAL_BLEU, "3.5": 40.5})
    moved = run_chain(tmp_path, seeds=3, STEPS="penalty", PENALTIES=grid, VAL_BLEU=higher)
    assert [c[0] for c in moved] == ["translate", "score", "translate", "score"]  # val 3.5, then the test at it
    assert moved[2][moved[2].index("--length-penalty") + 1] == "3.5" and moved[2][-1].endswith("test.de")


def test_a_linear_ensemble_has_its_own_figures(tmp_path: Path) -> None:
    commands = run_chain(tmp_path, seeds=2, STEPS="penalty", ENSEMBLE_MODE="linear")
    assert all(c[c.index("--ensemble-mode") + 1] == "linear" for c in commands if c[0] == "translate")
    assert (tmp_path / "runs" / "ensemble-of-2-linear" / "length_penalty").is_file()
    assert not (tmp_path / "runs" / "ensemble-of-2").exists()


def test_a_corpus_distilled_by_another_ensemble_is_not_reused(tmp_path: Path) -> None:
    run_chain(tmp_path, seeds=2)
    four = run_chain(tmp_path, seeds=4, STEPS="teachers,penalty,distill", expect=1)
    assert [c[0] for c in four].count("translate") == 7  # its own penalties and test, in ensemble-of-4
    assert "distill" not in [c[0] for c in four]
    assert (tmp_path / "runs" / "ensemble-distilled.seeds").read_text().strip() == "2 log-linear"


def test_the_worst_scored_pairs_are_scored_once_by_the_same_ensemble(tmp_path: Path) -> None:
    """WORST: the ensemble that distilled scores the corpus it wrote, once; clean-distilled ranks by those scores.
    A corpus distilled again is scored again."""
    first = run_chain(tmp_path, seeds=2, STEPS="teachers,penalty,distill", WORST="0.05")
    out = tmp_path / "runs"
    scored = [c for c in first if c[0] == "score-pairs"]
    assert len(scored) == 1 and scored[0][1] == str(out / "teacher-1") and "--ensemble" in scored[0]
    assert scored[0][scored[0].index("--target") + 1] == str(out / "ensemble-distilled.de")
    clean = next(c for c in first if c[0] == "clean-distilled")
    assert clean[clean.index("--worst") + 1] == "0.05"
    assert clean[clean.index("--scores") + 1] == str(out / "ensemble-distilled.scores.jsonl")
    again = run_chain(tmp_path, seeds=2, STEPS="distill", WORST="0.05")
    assert [c[0] for c in again] == ["clean-distilled"]
    (out / "ensemble-distilled.de").unlink()
    distilled_again = [c[0] for c in run_chain(tmp_path, seeds=2, STEPS="distill", WORST="0.05")]
    assert distilled_again == ["distill", "score-pairs", "clean-distilled"]
    plain = run_chain(tmp_path, seeds=2, STEPS="distill", WORST="0")
    assert [c[0] for c in plain] == ["clean-distilled"] and "--worst" not in plain[0]


def test_the_students_read_the_cleaned_corpus_the_chain_writes() -> None:
    text = SCRIPT.read_text(encoding="utf-8")
    assert '--out "$OUT/ensemble-distilled-clean"' in text and "OUT=${OUT:-runs}" in text
    for name in ("student-ensemble", "student-ensemble-deep"):
        recipe = tomllib.loads((ROOT / "recipes" / "multi30k-en-de" / f"{name}.toml").read_text(encoding="utf-8"))
        trains = [corpus["train"] for corpus in recipe["preprocess"]["corpora"]]
        assert trains == ["runs/ensemble-distilled-clean", "data/multi30k/train"]
