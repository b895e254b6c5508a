"""The one benchmark command: `python benchmarks/run.py <scenario> [--rounds N] [--small]`.

Scenarios (benchmarks/scenarios/): preprocess, train, translate, ct2search, serve, finetune, langid, multilingual,
backtranslation, noisy, subword, distill, splitting, paragraphs, confidence, casing, documents, shards; `all` runs the
CPU ones but ct2search, langid (a comparison of language detectors that `make install` does not install) and the ones
that train models for many minutes: multilingual (45 minutes at its default budget), backtranslation (six models of
--minutes each), noisy (four), subword (two, to the largest of --budgets) and distill (a teacher and two students); nor
the text ones: splitting (sentence splitters, pySBD among them when installed) and those that need a trained run as
--demo-run: paragraphs (paragraphs by `mtkit translate --split-sentences` and `mtkit serve`), confidence (how well
confidence finds the worst translations), casing (UPPER and Title Case input; --baseline-run for a second run),
documents (subtitles sentence-aware against cue by cue; a 50-page .docx against its text as lines), shards (`mtkit
back-translate` of 100,000 lines as 1 shard and as 2 shards at once on this host, the merge timed); int8
(CTranslate2's int8 against float32 by model width, with its ISA and GEMM switches: fixed work, random weights);
cpu_models (BLEU against sentences/s of a teacher, its ensemble and students with the CPU levers, and a picture);
step_flops (the demo recipe's training update in FLOP/s against the CPU's fp32 peak and a measured matmul peak, on
native and forced-AVX2 kernels, where its time goes, and the levers: fused Adam, threads, train.compile); terms
(--demo-run: term accuracy, BLEU and speed with per-sentence glossaries, term sets aligned by eflomal: '.[align]').
Each writes benchmarks/results/<scenario>-<date>-<commit>.{json,md} through benchmarks/harness.py. The GPU check is
`make gpu-check` (benchmarks/gpu_check.sh), not a scenario.
"""

from __future__ import annotations

import argparse

from scenarios import (
    backtranslation,
    casing,
    confidence,
    cpu_models,
    ct2search,
    distill,
    documents,
    finetune,
    int8,
    langid,
    multilingual,
    noisy,
    paragraphs,
    preprocess,
    serve,
    shards,
    splitting,
    step_flops,
    subword,
    terms,
    train,
    translate,
)

from mtkit.engines.config import ENSEMBLE_MODES

SCENARIOS = {
    "preprocess": preprocess.run,
    "train": train.run,
    "translate": translate.run,
    "ct2search": ct2search.run,
    "serve": serve.run,
    "finetune": finetune.run,
    "langid": langid.run,
    "multilingual": multilingual.run,
    "backtranslation": backtranslation.run,
    "noisy": noisy.run,
    "subword": subword.run,
    "distill": distill.run,
    "splitting": splitting.run,
    "paragraphs": paragraphs.run,
    "confidence": confidence.run,
    "casing": casing.run,
    "documents": documents.run,
    "shards": shards.run,
    "int8": int8.run,
    "cpu_models": cpu_models.run,
    "step_flops": step_flops.run,
    "terms": terms.run,
}
CPU = ("preprocess", "train", "translate", "serve", "finetune")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=[*SCENARIOS, "all"])
    parser.add_argument("--rounds", type=int, help="alternating rounds (default: 1 with --small, else 3)")
    parser.add_argument("--small", action="store_true", help="a few minutes per scenario: fewer updates and lines")
    parser.add_argument("--peers", action="store_true", help="train: the peers' Measure A in the same rounds")
    parser.add_argument(
        "--demo-run",
        help="ct2search: also the run of recipes/multi30k-en-de/run.sh (OUT/run); paragraphs, confidence, casing, "
        "documents, terms: "
        "the run they translate with; shards: the run that back-translates",
    )
    parser.add_argument("--baseline-run", help="casing: a second run, translated and scored as --demo-run is")
    parser.add_argument(
        "--minutes",
        type=float,
        default=15.0,
        help="multilingual: the training budget of each side; backtranslation, noisy: of each model; "
        "distill: of each student (0: to its recipe's max_steps)",
    )
    parser.add_argument(
        "--lines",
        type=int,
        help="backtranslation: back-translate only B's first N lines; "
        "noisy: use only the first N training lines (checks); "
        "splitting, paragraphs, confidence, casing, documents, terms: only the first N test lines (checks); "
        "shards: back-translate N lines (default 100,000; 5,000 with --small)",
    )
    parser.add_argument(
        "--teacher", help="distill: an existing run as the teacher instead of training one; cpu_models: the teacher"
    )
    parser.add_argument("--ensemble", action="append", help="cpu_models: another teacher ensembled with --teacher")
    parser.add_argument(
        "--ensemble-mode",
        default="log-linear",
        choices=ENSEMBLE_MODES,
        help="cpu_models: how the ensemble combines its teachers (mtkit translate --ensemble-mode), chosen on val",
    )
    parser.add_argument("--model", action="append", help="cpu_models: NAME=RUN_DIR, a student (repeat)")
    parser.add_argument(
        "--levers",
        action="append",
        help="cpu_models: a --model NAME that gets every CPU lever (repeat; default: the first)",
    )
    parser.add_argument("--student", help="distill: the student's recipe (default recipes/multi30k-en-de/student.toml)")
    parser.add_argument(
        "--length-penalty",
        type=float,
        help="distill: the teacher's length penalty, to distill and translate (default: its recipe's); "
        "cpu_models: the ensemble's, chosen on val (the teacher and each student get theirs on val in the run)",
    )
    parser.add_argument("--teacher-minutes", type=float, default=30.0, help="distill: the teacher's training budget")
    parser.add_argument(
        "--programs",
        help="step_flops: only these programs, named as in its table and separated by ';' "
        "('AVX2, fp32;AVX2, fp32, fused Adam')",
    )
    parser.add_argument("--budgets", default="15,30", help="subword: training minutes at which both runs are scored")
    parser.add_argument("--alpha", type=float, default=0.1, help="subword: the BPE-dropout rate against none")
    parser.add_argument(
        "--part",
        choices=("bilingual", "multilingual", "many"),
        help="multilingual: train one side only, or the 12-direction model",
    )
    # the child process of finetune (an engine) and of langid (a detector)
    parser.add_argument("--worker", choices=("mtkit", "transformers", *langid.WORKERS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.rounds = args.rounds or (1 if args.small else 3)
    for name in CPU if args.scenario == "all" else (args.scenario,):
        SCENARIOS[name](args)


if __name__ == "__main__":
    main()
