"""The best model a CPU can serve: BLEU against sentences/s for a teacher, its ensemble and students, and the CPU
levers (int8, threads, a vocabulary shortlist, greedy search, batch size) on a student or more, in one run.

Every program is `mtkit translate` of test_2016_flickr (1,000 lines) as a whole process (start-up and model load
included), --rounds alternating rounds, medians. The teacher (--teacher) and each --model NAME=RUN run on
CTranslate2 (`--engine ctranslate2 --ct2-search native`), each at its own length penalty chosen on val (beam 4,
among PENALTIES, never on test); the ensemble (the teacher with every --ensemble RUN, at --length-penalty and
--ensemble-mode, chosen on val by recipes/multi30k-en-de/ensemble.sh) runs on the torch engine, the only one that
ensembles, and so does the teacher once more for a like-for-like row. The first --model (or each --levers NAME) gets
every lever, one at a time from float32, beam 4, two threads, and combined. Each output is scored (sacreBLEU;
lower-cased tokenized BLEU too, as the Multi30k literature scores) and its runaways counted: lines longer than twice
their source in words, and lines that stutter (letters repeated in a row inside a word,
mtkit.bulk.distill_clean.STUTTER). Writes the table and docs/cpu-models.png (BLEU against sentences/s, log scale)
through matplotlib (`pip install -e '.[plots]'`).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from harness import ROOT, WORK, alternate, checked, figures, measure, medians, read_lines, write_results

from mtkit.bulk.distill_clean import STUTTER
from scenarios.workload import MULTI30K, mtkit

OUT = WORK / "cpu-models"
PICTURE = ROOT / "docs" / "cpu-models.png"
CT2 = ("--engine", "ctranslate2", "--ct2-search", "native")
BASE = ("--dtype", "fp32", "--beam", "4")
PENALTIES = ("0.6", "1.0", "1.5", "2.0", "2.5")
# (label, options) of every model on CTranslate2; the lever student gets LEVERS too
SETTINGS = {
    "fp32, beam 4": BASE,
    "fp32, greedy": ("--dtype", "fp32", "--beam", "1"),
    "int8, greedy, 2 workers x 1 thread, shortlist": (
        "--dtype",
        "int8",
        "--beam",
        "1",
        "--workers",
        "2",
        "--shortlist",
    ),
}
LEVERS = {
    "int8, beam 4": ("--dtype", "int8", "--beam", "4"),
    "int8, beam 4, 2 workers x 1 thread": ("--dtype", "int8", "--beam", "4", "--workers", "2"),
    "fp32, beam 4, 2 workers x 1 thread": (*BASE, "--workers", "2"),
    "fp32, beam 4, shortlist": (*BASE, "--shortlist"),
    "fp32, greedy, shortlist": ("--dtype", "fp32", "--beam", "1", "--shortlist"),
    "int8, greedy, 2 workers x 1 thread": ("--dtype", "int8", "--beam", "1", "--workers", "2"),
    "fp32, beam 4, batches of 1,000 tokens": (*BASE, "--batch-tokens", "1000"),
    "fp32, beam 4, batches of 16,000 tokens": (*BASE, "--batch-tokens", "16000"),
    # a batch searches the union of its sentences' candidates: the shortlist in smaller batches
    "fp32, beam 4, shortlist, batches of 1,000 tokens": (*BASE, "--shortlist", "--batch-tokens", "1000"),
    "int8, beam 4, 2 workers x 1 thread, shortlist, batches of 1,000 tokens": (
        "--dtype",
        "int8",
        "--beam",
        "4",
        "--workers",
        "2",
        "--shortlist",
        "--batch-tokens",
        "1000",
    ),
}


def named_runs(items: list[str]) -> dict[str, Path]:
    """--model NAME=RUN, in the order given."""
    runs = {}
    for item in items:
        name, sep, run = item.partition("=")
        if not sep or not Path(run).is_dir():
            raise SystemExit(f"--model {item}: give NAME=RUN_DIR of a trained run")
        runs[name] = Path(run).resolve()
    return runs


def runaways(sources: list[str], outputs: list[str]) -> int:
    """Lines longer than twice their source, in words."""
    return sum(len(out.split()) > 2 * len(src.split()) for src, out in zip(sources, outputs))


def stutters(outputs: list[str]) -> int:
    """Lines with a loop inside a word, piece by piece ("eine Dababababel"), as clean-distilled finds them: a runaway
    that the count of words misses."""
    return sum(STUTTER.search(line) is not None for line in outputs)


def scored(hyp: Path, refs: list[str], sources: list[str]) -> dict[str, float]:
    import sacrebleu

    from mtkit.score import lc_tok_bleu

    lines = hyp.read_text(encoding="utf-8").splitlines()
    return {
        "sacreBLEU": round(sacrebleu.corpus_bleu(lines, [refs]).score, 2),
        "lc-tok BLEU": round(lc_tok_bleu(lines, [refs], "de"), 2),
        "runaways": runaways(sources, lines),
        "stutters": stutters(lines),
    }


def programs(
    rows: dict[str, tuple[Path, tuple[str, ...]]], source: Path, lines: int, refs: list[str], sources: list[str]
) -> tuple[dict, dict[str, dict[str, float]]]:
    """One alternating program per row (its output scored once, untimed, first: the export into the run's cache
    happens there), and the scores."""
    found, scores = {}, {}
    for what, (run, options) in rows.items():
        hyp = OUT / "outputs" / (re.sub(r"\W+", "-", what).strip("-") + ".de")
        hyp.parent.mkdir(parents=True, exist_ok=True)
        cmd = mtkit("translate", str(run), *options, "-q", "-i", str(source), "-o", str(hyp))
        log = OUT / "logs" / hyp.stem
        checked(measure(cmd, log), what)
        scores[what] = scored(hyp, refs, sources)

        def once(round_: int, cmd: list[str] = cmd, log: Path = log, what: str = what) -> dict[str, float]:
            m = checked(measure(cmd, log), what)
            return {**figures(m), "sent_per_s": round(lines / m.wall_s, 1)}

        found[what] = once
    return found, scores


def val_penalty(name: str, run: Path, source: Path, refs: list[str]) -> tuple[str, dict[str, float]]:
    """The run's length penalty of the best val sacreBLEU on CTranslate2 at beam 4 (a tie: the smaller), and the
    val sacreBLEU of each; `source` is val's English as a file, `refs` its German."""
    import sacrebleu

    found = {}
    for lp in PENALTIES:
        hyp = OUT / "val" / f"{name}-{lp}.de"
        hyp.parent.mkdir(parents=True, exist_ok=True)
        cmd = mtkit("translate", str(run), *CT2, *BASE, "--length-penalty", lp, "-q", "-i", str(source), "-o", str(hyp))
        checked(measure(cmd, OUT / "logs" / hyp.stem), f"{name} on val at length penalty {lp}")
        found[lp] = round(sacrebleu.corpus_bleu(hyp.read_text(encoding="utf-8").splitlines(), [refs]).score, 2)
    return max(found, key=lambda lp: (found[lp], -float(lp))), found


def shortlist_candidates(run: Path, sources: list[str], sizes: tuple[int, ...] = (1, 32, 270)) -> dict[int, float]:
    """Batch size -> the mean number of target pieces CTranslate2 searches with the run's shortlist (the union of
    the candidates of the batch's source pieces and the frequent ones), batches of length-sorted sources as mtkit
    makes them."""
    import sentencepiece as spm

    always: set[str] = set()
    per_piece: dict[str, set[str]] = {}
    for line in (run / "shortlist.txt").read_text(encoding="utf-8").splitlines():
        key, _, targets = line.partition("\t")
        (per_piece.setdefault(key, set()) if key else always).update(targets.split())
    sp = spm.SentencePieceProcessor(model_file=str(run / "spm.model"))
    pieces = sorted((sp.encode(line, out_type=str) for line in sources), key=len)
    found = {}
    for size in sizes:
        unions = [
            len(always.union(*(per_piece.get(p, set()) for s in pieces[i : i + size] for p in s)))
            for i in range(0, len(pieces), size)
        ]
        found[size] = round(sum(unions) / len(unions), 1)
    return found


def picture(rows: list[dict], path: Path) -> None:
    """BLEU against sentences/s (log scale), one point per row, numbered, its model and setting in the key beside
    (the rows of one model lie close together: labels on the points would overlap)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(13, 6.5), dpi=110)
    markers = {"ensemble": "*", "teacher": "s"}
    for number, row in enumerate(rows, 1):
        marker = markers.get(row["model"].split(" ")[0], "o")
        label = f"{number}. {row['model']}: {row['setting']} ({row['sacreBLEU']})"
        ax.scatter(row["sent/s"], row["sacreBLEU"], marker=marker, s=90 if marker == "*" else 35, label=label)
        ax.annotate(
            str(number), (row["sent/s"], row["sacreBLEU"]), fontsize=7, xytext=(3, 3), textcoords="offset points"
        )
    ax.set_xscale("log")
    ax.set_xlabel("sentences/s, whole process, 1,000 lines of test_2016_flickr (log scale)")
    ax.set_ylabel("sacreBLEU, test_2016_flickr")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def run(args: argparse.Namespace) -> None:
    if not args.teacher or not args.model:
        raise SystemExit("cpu_models: give --teacher RUN and at least one --model NAME=RUN")
    teacher, students = Path(args.teacher).resolve(), named_runs(args.model)
    levers = args.levers or [next(iter(students))]
    for name in levers:
        if name not in students:
            raise SystemExit(f"--levers {name}: not a --model NAME ({', '.join(students)})")
    for name, run_dir in students.items():
        if not (run_dir / "shortlist.txt").is_file():
            raise SystemExit(f"--model {name}: no shortlist; make one first: mtkit shortlist {run_dir} DATA_DIR")
    OUT.mkdir(parents=True, exist_ok=True)
    sources = read_lines(MULTI30K / "test_2016_flickr.en.gz")
    refs = read_lines(MULTI30K / "test_2016_flickr.de.gz")
    source = OUT / "test.en"
    source.write_text("\n".join(sources) + "\n", encoding="utf-8")
    val, val_refs = OUT / "val.en", read_lines(MULTI30K / "val.de.gz")
    val.write_text("\n".join(read_lines(MULTI30K / "val.en.gz")) + "\n", encoding="utf-8")
    runs = {"teacher": teacher, **students}
    on_val = {name: val_penalty(name, run_dir, val, val_refs) for name, run_dir in runs.items()}
    lp = {name: ("--length-penalty", chosen) for name, (chosen, _) in on_val.items()}
    penalty = ["--length-penalty", str(args.length_penalty)] if args.length_penalty is not None else []
    table: dict[str, tuple[Path, tuple[str, ...]]] = {"teacher, fp32, beam 4": (teacher, (*CT2, *BASE, *lp["teacher"]))}
    if args.ensemble:
        others = [item for run in args.ensemble for item in ("--ensemble", str(Path(run).resolve()))]
        mode = ("--ensemble-mode", args.ensemble_mode)
        table[f"ensemble of {1 + len(args.ensemble)}, torch, fp32, beam 4"] = (
            teacher,
            (*BASE, *others, *mode, *penalty),
        )
        table["teacher, torch, fp32, beam 4"] = (teacher, (*BASE, *lp["teacher"]))
    table |= {
        f"teacher, {label}": (teacher, (*CT2, *options, *lp["teacher"]))
        for label, options in SETTINGS.items()
        if "shortlist" not in label
    }
    for name, run_dir in students.items():
        settings = SETTINGS | (LEVERS if name in levers else {})
        table |= {f"{name}, {label}": (run_dir, (*CT2, *options, *lp[name])) for label, options in settings.items()}
    found, scores = programs(table, source, len(sources), refs, sources)
    results = alternate(found, args.rounds)
    base = medians(results["teacher, fp32, beam 4"])["sent_per_s"]
    ensemble = next((medians(results[w])["sent_per_s"] for w in results if w.startswith("ensemble")), None)
    rows = []
    for what, rounds in results.items():
        model, _, setting = what.partition(", ")
        speed = medians(rounds)
        rows.append(
            {
                "model": model,
                "setting": setting,
                **scores[what],
                "sent/s": speed["sent_per_s"],
                "vs teacher fp32 beam 4": round(speed["sent_per_s"] / base, 2),
                **({"vs ensemble": round(speed["sent_per_s"] / ensemble, 2)} if ensemble else {}),
                "peak RSS MiB": speed["peak_rss_mib"],
            }
        )
    picture(rows, PICTURE)
    candidates = {name: shortlist_candidates(run_dir, sources) for name, run_dir in students.items()}
    report = {
        "shortlist_candidates_per_batch_size": candidates,
        "teacher": args.teacher,  # as given: no path of the machine that ran it
        "ensemble": args.ensemble,
        "ensemble_length_penalty": args.length_penalty,
        "ensemble_mode": args.ensemble_mode,
        "length_penalty_on_val": {
            name: {"chosen": chosen, "val sacreBLEU": found} for name, (chosen, found) in on_val.items()
        },
        "models": args.model,
    }
    write_results(
        "cpu_models",
        {**report, "levers": levers, "rounds": args.rounds, "picture": str(PICTURE.relative_to(ROOT))},
        rows,
    )
