"""Translating text in unusual case: test_2016_flickr's first 1,000 lines (200 with --small, N with --lines N) en->de
as written, in UPPER CASE (str.upper) and in Title Case (each space-separated word's first letter upper-cased, the
rest as written), each translated by --demo-run and, when given, --baseline-run (`mtkit translate RUN --beam 4`, the
run's other settings), on two paths: as `mtkit translate` reads lines, and with --split-sentences, the path of mtkit
serve (capitals and Title Case translated in sentence case and given the source's case back). sacreBLEU against the
German references: cased and case-insensitive (sacrebleu's lowercase=True, `-lc`) for the text as written, case-
insensitive for UPPER and Title; the translation's own seconds (the CLI's "translated N lines in S s", model load
excluded) and the output's length ratio (hypothesis / reference tokens).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness import WORK, write_lines, write_results

from scenarios.langid import read_lines
from scenarios.texts import append_notes, bleu, demo_run, translate

BEAM = "4"


def title_case(line: str) -> str:
    """Each space-separated word's first letter upper-cased, the rest as written (str.title lower-cases it)."""
    return " ".join(word[:1].upper() + word[1:] for word in line.split(" "))


VARIANTS = {"as written": lambda line: line, "UPPER": str.upper, "Title": title_case}


# How the lines reach the model: as `mtkit translate` reads them, and as mtkit serve does (sentence by sentence, with
# capitals and Title Case put in sentence case and back: mtkit/text/casing.py).
PATHS = {"translate": (), "--split-sentences": ("--split-sentences",)}


def scored(run: Path, role: str, path: str, sources: dict[str, Path], refs: list[str], out: Path) -> dict:
    """One run's row on one path: BLEU, seconds and length ratio of each variant."""
    row: dict = {"run": f"{role}: {run.parent.name}/{run.name}", "path": path}
    for name, source in sources.items():
        print(f"{role}, {path}: {name}", file=sys.stderr, flush=True)
        target = out / f"{role}-{path.strip('-')}-{source.stem}.de"
        outputs, seconds, _ = translate(run, source, target, "--beam", BEAM, *PATHS[path])
        lowercased, ratio = bleu(outputs, refs, lowercase=True)
        if name == "as written":
            row[f"{name} BLEU"] = bleu(outputs, refs)[0]
        row[f"{name} BLEU -lc"] = lowercased
        row[f"{name} s"] = round(seconds, 2)
        row[f"{name} len ratio"] = ratio
    return row


def run(args: argparse.Namespace) -> None:
    demo = demo_run(args, "casing")
    runs = {"demo": demo} | ({"baseline": Path(args.baseline_run).resolve()} if args.baseline_run else {})
    count = args.lines or (200 if args.small else 1000)
    out = WORK / "casing" / ("small" if args.small else "full")
    lines = [line.strip() for line in read_lines("en", count)]
    refs = [line.strip() for line in read_lines("de", count)]
    sources = {
        name: write_lines(out / f"{name.replace(' ', '-')}.en", [change(line) for line in lines])
        for name, change in VARIANTS.items()
    }
    rows = [scored(model, role, path, sources, refs, out) for role, model in runs.items() for path in PATHS]
    result = write_results("casing", {"runs": {k: str(v) for k, v in runs.items()}, "lines": count}, rows)
    append_notes(
        result,
        [
            f"test_2016_flickr's first {count} lines, en->de, beam {BEAM}; -lc: sacreBLEU case-insensitive, "
            "so UPPER and Title are scored on the words, not on the case the model wrote them in.",
        ],
    )
