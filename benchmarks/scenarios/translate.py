"""Translating test_2016_flickr with each engine on the same model: `mtkit translate` with torch fp32 (the
baseline) and bf16, with CTranslate2 float32 and int8, and the bare CTranslate2 script (ctranslate2 +
sentencepiece only, benchmarks/ct2_translate_export.py) on `mtkit export`'s model, beam 4, length penalty 0.
Each run is a whole process; reported: its own decode time's sentences/s, wall, CPU, peak RSS, and lines
identical to the baseline's output.
"""

from __future__ import annotations

import argparse
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
    translation_program,
    write_results,
)

from scenarios.workload import model, mtkit, test_source

BARE = Path(__file__).resolve().parents[1] / "ct2_translate_export.py"


def export(run: Path, quantization: str) -> Path:
    out = WORK / f"export-{quantization}"
    if not (out / "model.bin").is_file():
        cmd = mtkit("export", str(run), "--to", "ctranslate2", "--out", str(out))
        checked(
            measure(
                cmd + (["--quantization", "int8"] if quantization == "int8" else []),
                WORK / "logs" / f"export-{quantization}",
            ),
            "mtkit export",
        )
    return out


def commands(run: Path, source: Path) -> dict[str, list[str]]:
    def translate(engine: str, dtype: str) -> list[str]:
        return mtkit(
            "translate",
            str(run),
            "--engine",
            engine,
            "--dtype",
            dtype,
            "--beam",
            "4",
            "--length-penalty",
            "0",
            "-i",
            str(source),
            "-o",
            str(WORK / f"hyp-{engine}-{dtype}"),
        )

    bare = [
        sys.executable,
        str(BARE),
        str(export(run, "float32")),
        str(source),
        str(WORK / "hyp-bare-float32"),
        "--compute-type",
        "float32",
        "--threads",
        "2",
        "--settings",
        "matched",
    ]
    return {
        "torch fp32": translate("torch", "fp32"),
        "torch bf16": translate("torch", "bf16"),
        "ctranslate2 float32": translate("ctranslate2", "float32"),
        "ctranslate2 int8": translate("ctranslate2", "int8"),
        "bare CTranslate2 float32": bare,
    }


def run(args: argparse.Namespace) -> None:
    lines = 200 if args.small else 1000
    run_dir, source = model(100 if args.small else 1000), test_source(lines)
    for dtype in ("float32", "int8"):  # --engine ctranslate2 exports on first use: done here, not in a timed run
        warm = mtkit("translate", str(run_dir), "--engine", "ctranslate2", "--dtype", dtype, "-i", str(test_source(1)))
        checked(measure(warm, WORK / "logs" / f"warm-{dtype}"), "mtkit translate --engine ctranslate2")
    cmds = commands(run_dir, source)
    programs = {
        name: translation_program(name, cmd, lines, WORK / "logs" / name.replace(" ", "-"))
        for name, cmd in cmds.items()
    }
    results = alternate(programs, args.rounds)
    outputs = {name: output_lines(cmd) for name, cmd in cmds.items()}
    rel = ratios(results)
    rows = [
        {
            "program": name,
            **medians(r),
            "sent/s vs torch fp32": rel[name].get("sent_per_s"),
            "RSS vs torch fp32": rel[name].get("peak_rss_mib"),
            "lines as torch fp32": f"{identical_lines(outputs['torch fp32'], outputs[name])}/{lines}",
        }
        for name, r in results.items()
    ]
    write_results("translate", {"rounds": results, "model_updates": run_dir.name}, rows)
