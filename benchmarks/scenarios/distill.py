"""Sequence-level distillation (Kim and Rush 2016) on Multi30k en-de.

The teacher is recipes/multi30k-en-de/small.toml trained --teacher-minutes (or an existing run, --teacher RUN);
`mtkit distill` translates the 29,000 training sources with it (CTranslate2, its native search, the recipe's beam
4); recipes/multi30k-en-de/student.toml is trained --minutes on the distilled corpus and, the same, on the
references. Each model is averaged over its last 3 checkpoints and scored as the other training scenarios score:
sacreBLEU on test_2016_flickr, torch engine, beam 4. Speed: `mtkit translate --engine ctranslate2` of
test_2016_flickr by each model in fp32 and int8, whole process, --rounds alternating rounds, sentences/s from the
wall time, medians, ratios to the teacher in fp32 (CTranslate2 native search, beam 4).

Everything lives in bench-out/distill/; trained models and a finished distillation are reused, so a killed run
goes on.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from harness import ROOT, WORK, alternate, checked, figures, measure, medians, ratios, write_results
from scenarios.multilingual import BILINGUAL, bleu, trained, updates
from scenarios.workload import MULTI30K, mtkit

OUT = WORK / "distill"
STUDENT = ROOT / "recipes" / "multi30k-en-de" / "student.toml"
DTYPES = ("fp32", "int8")
HELD_OUT = ["--valid", str(MULTI30K / "val"), "--test", str(MULTI30K / "test_2016_flickr")]


def distilled(teacher: Path) -> tuple[Path, dict]:
    """OUT/distilled/train.{en,de}: the teacher's translations of the training sources, and the command's summary
    with its wall time (reused once finished; an unfinished one goes on where it stopped)."""
    prefix = OUT / "distilled" / "train"
    summary = Path(f"{prefix}.summary.json")
    if not summary.is_file():
        cmd = mtkit("distill", str(teacher), "-i", str(MULTI30K / "train.en.gz"), "-o", str(prefix), "--json")
        m = checked(measure(cmd, prefix.parent / "distill"), "distill")
        summary.write_text(json.dumps({**json.loads(m.stdout.splitlines()[-1]), "wall_s": m.wall_s}) + "\n")
    return prefix, json.loads(summary.read_text())


def speed(models: dict[str, Path], rounds: int) -> dict[str, list[dict[str, float]]]:
    """Whole-process `mtkit translate --engine ctranslate2` of test_2016_flickr per model and dtype, alternating."""
    source = OUT / "test.en"  # written by bleu()
    lines = len(source.read_text(encoding="utf-8").splitlines())
    programs = {}
    for name, run in models.items():
        for dtype in DTYPES:
            cmd = mtkit("translate", str(run), "--engine", "ctranslate2", "--dtype", dtype, "--ct2-search", "native",
                        "--beam", "4", "-q", "-i", str(source), "-o", str(run.parent / f"speed.{dtype}.de"))
            log = OUT / "logs" / re.sub(r"\W+", "-", f"{name}-{dtype}")
            checked(measure(cmd, log), f"translate {name} {dtype}")  # the export into the run's cache, untimed

            def once(round_: int, cmd: list[str] = cmd, log: Path = log, what: str = f"{name} {dtype}") -> dict:
                m = checked(measure(cmd, log), what)
                return {**figures(m), "sent_per_s": round(lines / m.wall_s, 1)}
            programs[f"{name}, {dtype}"] = once
    return alternate(programs, rounds)


def run(args: argparse.Namespace) -> None:
    files = ["--train", str(MULTI30K / "train"), *HELD_OUT]
    teacher = (Path(args.teacher).resolve() if args.teacher else
               trained("teacher", ["--config", str(BILINGUAL), *files], BILINGUAL, args.teacher_minutes, OUT))
    prefix, summary = distilled(teacher)
    models = {"teacher": teacher,
              "student, distilled": trained("student-distilled", ["--config", str(STUDENT), "--train", str(prefix),
                                                                  *HELD_OUT], STUDENT, args.minutes, OUT),
              "student, references": trained("student-references", ["--config", str(STUDENT), *files], STUDENT,
                                             args.minutes, OUT)}
    scores = {name: bleu(run_dir, "de", False, "en", OUT) for name, run_dir in models.items()}
    results = speed(models, args.rounds)
    rel = ratios(results)
    rows = [{"model": name, "dtype": dtype, "updates": updates(run_dir), "sacreBLEU": scores[name],
             **medians(results[f"{name}, {dtype}"]), "sent/s vs teacher fp32": rel[f"{name}, {dtype}"].get("sent_per_s")}
            for name, run_dir in models.items() for dtype in DTYPES]
    write_results("distill", {"teacher": str(teacher), "teacher_minutes": None if args.teacher else args.teacher_minutes,
                              "student_minutes": args.minutes, "distillation": summary, "rounds": args.rounds}, rows)
