"""`mtkit translate --engine ctranslate2` with --ct2-search native and exact against the bare CTranslate2 script
(benchmarks/ct2_translate_export.py --settings native, the baseline) on the same exported model (the run's own
cache), beam 4, length penalty 0, 4,000-token batches, on the benchmark's model and, with --demo-run, the demo's.
Reported: whole-process figures and ratios to the bare script, lines equal between them, sacreBLEU of each; lines
equal and BLEU at the recipes' alpha 0.6 too (one untimed run each).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from harness import (
    WORK,
    alternate,
    checked,
    identical_lines,
    measure,
    medians,
    output_lines,
    ratios,
    read_lines,
    translation_program,
    write_results,
)

from scenarios.workload import MULTI30K, model, mtkit, test_source

BARE = Path(__file__).resolve().parents[1] / "ct2_translate_export.py"
SEARCH = ["--beam", "4", "--batch-tokens", "4000"]


def commands(run: Path, source: Path, alpha: str) -> dict[str, list[str]]:
    """The three programs at length penalty `alpha`, each writing bench-out/ct2search/<model>-<program>-<alpha>."""
    out = WORK / "ct2search" / label(run)

    def translate(search: str) -> list[str]:
        return mtkit(
            "translate",
            str(run),
            "--engine",
            "ctranslate2",
            "--ct2-search",
            search,
            *SEARCH,
            "--length-penalty",
            alpha,
            "-i",
            str(source),
            "-o",
            str(out / f"{search}-{alpha}"),
        )

    bare = [
        sys.executable,
        str(BARE),
        str(run / "ctranslate2"),
        str(source),
        str(out / f"bare-{alpha}"),
        "--threads",
        "2",
        "--settings",
        "native",
        "--batch-tokens",
        "4000",
        "--length-penalty",
        alpha,
    ]
    out.mkdir(parents=True, exist_ok=True)
    return {
        "bare CTranslate2, native": bare,
        "mtkit --ct2-search native": translate("native"),
        "mtkit --ct2-search exact": translate("exact"),
    }


def label(run: Path) -> str:
    return f"{run.parent.name}/{run.name}"


def compare(run: Path, source: Path, lines: int, rounds: int) -> list[dict]:
    """Rows of one model: timed rounds at alpha 0, then one untimed run of each mtkit search at alpha 0.6."""
    import sacrebleu

    warm = mtkit("translate", str(run), "--engine", "ctranslate2", "-i", str(test_source(1)))
    checked(measure(warm, WORK / "logs" / "ct2search-warm"), "mtkit translate --engine ctranslate2")  # the export
    cmds = commands(run, source, "0")
    logs = {name: WORK / "logs" / ("ct2search-" + re.sub(r"\W+", "-", name)) for name in cmds}
    results = alternate({name: translation_program(name, cmd, lines, logs[name]) for name, cmd in cmds.items()}, rounds)
    refs = read_lines(MULTI30K / "test_2016_flickr.de.gz", lines)
    outputs = {name: output_lines(cmd) for name, cmd in cmds.items()}
    at_06 = commands(run, source, "0.6")
    for name in ("mtkit --ct2-search native", "mtkit --ct2-search exact"):
        checked(measure(at_06[name], WORK / "logs" / "ct2search-alpha-0.6"), name)
    native, exact = output_lines(at_06["mtkit --ct2-search native"]), output_lines(at_06["mtkit --ct2-search exact"])
    rel = ratios(results)
    rows = [
        {
            "model": label(run),
            "program": name,
            **medians(r),
            "wall vs bare": rel[name].get("wall_s"),
            "RSS vs bare": rel[name].get("peak_rss_mib"),
            "per round wall s": [x["wall_s"] for x in r],
            "lines as native": f"{identical_lines(outputs['mtkit --ct2-search native'], outputs[name])}/{lines}",
            "BLEU": round(sacrebleu.corpus_bleu(outputs[name], [refs]).score, 2),
        }
        for name, r in results.items()
    ]
    rows.append(
        {
            "model": label(run),
            "program": "alpha 0.6: native, exact (untimed)",
            "lines as native": f"{identical_lines(native, exact)}/{lines}",
            "BLEU": f"{sacrebleu.corpus_bleu(native, [refs]).score:.2f}, "
            f"{sacrebleu.corpus_bleu(exact, [refs]).score:.2f}",
        }
    )
    return rows


def run(args: argparse.Namespace) -> None:
    lines = 200 if args.small else 1000
    source = test_source(lines)
    runs = [model(100)] + ([Path(args.demo_run).resolve()] if args.demo_run else [])
    rows = [row for run_dir in runs for row in compare(run_dir, source, lines, args.rounds)]
    write_results("ct2search", {"models": [str(r) for r in runs]}, rows)
