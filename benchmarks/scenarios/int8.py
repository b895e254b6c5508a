"""Why CTranslate2's int8 is or is not faster than float32 on this CPU: the same fixed decoding work (every sentence
exactly --steps steps, so a model's weights do not matter) by models of random weights that differ only in width.

Models: 4+4 post-norm layers, an 8,000-piece shared vocabulary, d_model 128 / FFN 256 (the Transformer-Tiny
teacher's and its students' width), 256 / 1024 and 512 / 2048 (the paper's base width). Each is run by
benchmarks/ct2_fixed_work.py in its own process (512 synthetic sentences of 14 pieces, 16 steps each, batches of
32) in float32 and int8 at beam 4 and greedy, with CTranslate2 as installed and with the two switches it reads
from the environment: CT2_FORCE_CPU_ISA=AVX512 (it picks AVX2 on AMD CPUs) and CT2_USE_MKL=1 (it uses oneDNN on
them); on one thread; and as two batches at once on one thread each (CTranslate2's inter_threads, mtkit's
--workers 2). Decoding seconds (model load excluded), --rounds alternating rounds, medians; int8's
speed relative to float32 of the same model and setting. CTranslate2's own report of its ISA and GEMM backends is
kept in the results.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from harness import ROOT, WORK, alternate, checked, measure, medians, write_results

OUT = WORK / "int8"
VOCAB = 8000
WIDTHS = {"d128": (128, 256, 4), "d256": (256, 1024, 4), "d512": (512, 2048, 8)}  # d_model, FFN, heads
SWITCHES = {"as installed": {}, "AVX512": {"CT2_FORCE_CPU_ISA": "AVX512"}, "MKL": {"CT2_USE_MKL": "1"}}
COMPUTE_TYPES = ("float32", "int8")


def built(name: str) -> Path:
    """OUT/NAME: a CTranslate2 model of that width with random weights (made once), through mtkit's exporter."""
    out = OUT / name
    if (out / "model.bin").is_file():
        return out
    import ctranslate2
    import torch

    from mtkit.exports.ctranslate2 import build_spec
    from mtkit.model.transformer import ModelConfig, Transformer

    d_model, d_ff, heads = WIDTHS[name]
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=VOCAB, d_model=d_model, n_heads=heads, d_ff=d_ff, encoder_layers=4, decoder_layers=4)
    pieces = ["<pad>", "<unk>", "<s>", "</s>"] + [f"▁p{i}" for i in range(VOCAB - 4)]
    spec = build_spec(ctranslate2.specs, Transformer(cfg).eval(), pieces, unk_id=1)
    spec.validate()
    spec.optimize()
    out.mkdir(parents=True, exist_ok=True)
    spec.save(str(out))
    (out / "pieces.json").write_text(json.dumps(pieces[4:]), encoding="utf-8")
    return out


def version_report(model: Path) -> list[str]:
    """CTranslate2's lines on the CPU, ISA and GEMM backends it picked, as installed and with each switch."""
    lines = []
    for switch, env in SWITCHES.items():
        m = checked(
            measure(
                [sys.executable, str(ROOT / "benchmarks" / "ct2_fixed_work.py"), str(model), "--sentences", "1"],
                OUT / "logs" / f"verbose-{switch.replace(' ', '-')}",
                env={**os.environ, **env, "CT2_VERBOSE": "1"},
            ),
            "ct2 verbose",
        )
        found = [x.split("[info]")[-1].strip() for x in m.stderr.splitlines() if "backend" in x or "ISA" in x]
        lines.append(f"{switch}: " + "; ".join(found))
    return lines


def program(model: Path, compute_type: str, beam: int, threads: tuple[int, int], env: dict[str, str], log: Path):
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "ct2_fixed_work.py"),
        str(model),
        "--compute-type",
        compute_type,
        "--beam",
        str(beam),
        "--threads",
        str(threads[0]),
        "--workers",
        str(threads[1]),
    ]

    def once(round_: int) -> dict[str, float]:
        m = checked(measure(cmd, log, env={**os.environ, **env}), log.name)
        line = next(x for x in m.stdout.splitlines() if x.startswith("RESULT "))
        return json.loads(line[len("RESULT ") :])

    return once


def settings() -> list[tuple[str, int, tuple[int, int], str]]:
    """(switch, beam, (threads per batch, batches at once), label) measured for every width."""
    found = [(switch, 4, (2, 1), f"{switch}, beam 4, 2 threads") for switch in SWITCHES]
    return found + [
        ("as installed", 1, (2, 1), "as installed, greedy, 2 threads"),
        ("as installed", 4, (1, 1), "as installed, beam 4, 1 thread"),
        ("as installed", 4, (1, 2), "as installed, beam 4, 2 workers x 1 thread"),
    ]


def run(args: argparse.Namespace) -> None:
    models = {name: built(name) for name in WIDTHS}
    report = version_report(models["d128"])
    programs = {}
    for name, model in models.items():
        for switch, beam, threads, label in settings():
            for compute_type in COMPUTE_TYPES:
                what = f"{name}, {compute_type}, {label}"
                log = OUT / "logs" / what.replace(", ", "-").replace(" ", "-")
                programs[what] = program(model, compute_type, beam, threads, SWITCHES[switch], log)
    results = alternate(programs, args.rounds)
    rows = []
    for name in models:
        for _, _, _, label in settings():
            fp32 = medians(results[f"{name}, float32, {label}"])["decode_s"]
            int8 = medians(results[f"{name}, int8, {label}"])["decode_s"]
            rows.append(
                {
                    "model": name,
                    "setting": label,
                    "float32 decode s": fp32,
                    "int8 decode s": int8,
                    "int8 speed vs float32": round(fp32 / int8, 3),
                }
            )
    write_results("int8", {"ctranslate2_report": report, "rounds": args.rounds}, rows)
