"""Sequence-level distillation (Kim and Rush 2016) on Multi30k en-de.

The teacher is recipes/multi30k-en-de/small.toml trained --teacher-minutes (or an existing run, --teacher RUN);
`mtkit distill` translates the 29,000 training sources with it (CTranslate2, its native search, the teacher's beam
and length penalty, or --length-penalty's, which the teacher then also translates with); the --student recipe
(recipes/multi30k-en-de/student.toml unless named) is trained on the distilled corpus and, the same, on the
references, for --minutes each (0: to the recipe's max_steps). Each model is averaged as its recipe says and scored
as the other training scenarios score: sacreBLEU on test_2016_flickr, torch engine, beam 4. Speed: `mtkit translate
--engine ctranslate2 --ct2-search native` of test_2016_flickr, and of it ten times over (10,000 lines, so that
start-up weighs less), by each model in fp32 and int8, with beam 4 and greedy, whole process, --rounds alternating
rounds, sentences/s from the wall time, medians, ratios to the teacher in fp32 with beam 4 on the same input; each
translation of test_2016_flickr is scored too (sacreBLEU).

Everything lives in bench-out/distill/; trained models and a finished distillation are reused, so a killed run
goes on.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from harness import ROOT, WORK, alternate, checked, figures, measure, medians, ratios, read_lines, write_results

from scenarios.multilingual import BILINGUAL, bleu, trained, updates
from scenarios.workload import MULTI30K, mtkit

OUT = WORK / "distill"
STUDENT = ROOT / "recipes" / "multi30k-en-de" / "student.toml"
DTYPES = ("fp32", "int8")
BEAMS = (4, 1)
REPEATS = (1, 10)  # the test set once (1,000 lines), and ten times over
HELD_OUT = ["--valid", str(MULTI30K / "val"), "--test", str(MULTI30K / "test_2016_flickr")]


def distilled(teacher: Path, options: list[str]) -> tuple[Path, dict]:
    """OUT/distilled/train.{en,de}: the teacher's translations of the training sources, and the command's summary
    with its wall time (reused once finished; an unfinished one goes on where it stopped)."""
    prefix = OUT / "distilled" / "train"
    summary = Path(f"{prefix}.summary.json")
    if not summary.is_file():
        cmd = mtkit("distill", str(teacher), *options, "-i", str(MULTI30K / "train.en.gz"), "-o", str(prefix), "--json")
        m = checked(measure(cmd, prefix.parent / "distill"), "distill")
        summary.write_text(json.dumps({**json.loads(m.stdout.splitlines()[-1]), "wall_s": m.wall_s}) + "\n")
    return prefix, json.loads(summary.read_text())


def program(name: str, dtype: str, beam: int, repeat: int) -> str:
    return f"{name}, {dtype}, beam {beam}" + (f", test x{repeat}" if repeat > 1 else "")


def speed(
    models: dict[str, Path], options: dict[str, list[str]], rounds: int
) -> tuple[dict[str, list[dict[str, float]]], dict[str, float]]:
    """Whole-process `mtkit translate --engine ctranslate2` per model (with its `options`), dtype, beam and input
    (test_2016_flickr, and it REPEATS times over: start-up shared by more lines), alternating; and the sacreBLEU of
    each model's translation of test_2016_flickr."""
    import sacrebleu

    test = (OUT / "test.en").read_text(encoding="utf-8")  # written by bleu()
    refs = read_lines(MULTI30K / "test_2016_flickr.de.gz")
    programs, scores = {}, {}
    for repeat in REPEATS:
        source = OUT / f"test.x{repeat}.en"
        source.write_text(test * repeat, encoding="utf-8")
        lines = len(refs) * repeat
        for name, run in models.items():
            for dtype in DTYPES:
                for beam in BEAMS:
                    what = program(name, dtype, beam, repeat)
                    hyp = run.parent / f"speed.{dtype}.beam{beam}.x{repeat}.de"
                    cmd = mtkit(
                        "translate",
                        str(run),
                        "--engine",
                        "ctranslate2",
                        "--dtype",
                        dtype,
                        "--ct2-search",
                        "native",
                        "--beam",
                        str(beam),
                        *options[name],
                        "-q",
                        "-i",
                        str(source),
                        "-o",
                        str(hyp),
                    )
                    log = OUT / "logs" / re.sub(r"\W+", "-", what)
                    checked(measure(cmd, log), f"translate {what}")  # the export into the run's cache, untimed
                    if repeat == 1:
                        output = hyp.read_text(encoding="utf-8").splitlines()
                        scores[what] = round(sacrebleu.corpus_bleu(output, [refs]).score, 2)

                    def once(
                        round_: int, cmd: list[str] = cmd, log: Path = log, what: str = what, lines: int = lines
                    ) -> dict:
                        m = checked(measure(cmd, log), what)
                        return {**figures(m), "sent_per_s": round(lines / m.wall_s, 1)}

                    programs[what] = once
    return alternate(programs, rounds), scores


def run(args: argparse.Namespace) -> None:
    files = ["--train", str(MULTI30K / "train"), *HELD_OUT]
    student = Path(args.student).resolve() if args.student else STUDENT
    teacher = (
        Path(args.teacher).resolve()
        if args.teacher
        else trained("teacher", ["--config", str(BILINGUAL), *files], BILINGUAL, args.teacher_minutes, OUT)
    )
    # A teacher trained before its recipe's length penalty was chosen searches with the chosen one when told.
    teacher_options = ["--length-penalty", str(args.length_penalty)] if args.length_penalty is not None else []
    prefix, summary = distilled(teacher, teacher_options)
    models = {
        "teacher": teacher,
        "student, distilled": trained(
            "student-distilled",
            ["--config", str(student), "--train", str(prefix), *HELD_OUT],
            student,
            args.minutes,
            OUT,
        ),
        "student, references": trained(
            "student-references", ["--config", str(student), *files], student, args.minutes, OUT
        ),
    }
    options = {name: teacher_options if name == "teacher" else [] for name in models}
    scores = {name: bleu(run_dir, "de", False, "en", OUT, options[name]) for name, run_dir in models.items()}
    results, ct2_scores = speed(models, options, args.rounds)
    test_lines = len((OUT / "test.en").read_text(encoding="utf-8").splitlines())
    rel = {repeat: ratios(results, program("teacher", "fp32", 4, repeat)) for repeat in REPEATS}
    rows = [
        {
            "model": name,
            "lines": test_lines * repeat,
            "dtype": dtype,
            "beam": beam,
            "updates": updates(run_dir),
            "sacreBLEU (torch, beam 4)": scores[name],
            "sacreBLEU (CTranslate2, test_2016_flickr once)": ct2_scores[program(name, dtype, beam, 1)],
            **medians(results[what]),
            "sent/s vs teacher fp32 beam 4": rel[repeat][what].get("sent_per_s"),
        }
        for repeat in REPEATS
        for name, run_dir in models.items()
        for dtype in DTYPES
        for beam in BEAMS
        for what in [program(name, dtype, beam, repeat)]
    ]
    teacher_minutes = None if args.teacher else args.teacher_minutes
    write_results(
        "distill",
        {
            "teacher": str(teacher),
            "teacher_minutes": teacher_minutes,
            "teacher_options": teacher_options,
            "student": str(student),
            "student_minutes": args.minutes,
            "distillation": summary,
            "rounds": args.rounds,
        },
        rows,
    )
