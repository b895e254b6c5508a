"""One multilingual model (en -> de, fr, cs: recipes/multi30k-multilingual/en-xx.toml) against three bilingual
models (recipes/multi30k-en-de/small.toml with the pair's languages) trained with the same total budget on the
same CPU: --minutes for the multilingual model, a third of it for each bilingual one. Each model is averaged as the
demo averages it and translates test_2016_flickr with the torch engine, beam 4 and its recipe's search; sacreBLEU
per direction, and the updates each model made.

Trained models are kept in bench-out/multilingual/ and reused, so the parts can run at different times
(--part bilingual, --part multilingual); a report is written when every model of the comparison exists.

--part many: one model of all 12 directions between en, de, fr and cs (recipes/multi30k-multilingual/many.toml)
trained for --minutes, scored in every direction the same way, beside the en -> xx model where it exists.
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from harness import ROOT, WORK, checked, measure, read_lines, write_lines, write_results

from scenarios.workload import MULTI30K, mtkit

BILINGUAL = ROOT / "recipes" / "multi30k-en-de" / "small.toml"
MULTILINGUAL = ROOT / "recipes" / "multi30k-multilingual" / "en-xx.toml"
MANY = ROOT / "recipes" / "multi30k-multilingual" / "many.toml"
TARGETS = ("de", "fr", "cs")
LANGS = ("en", *TARGETS)
OUT = WORK / "multilingual"


def trained(name: str, preprocess: list[str], recipe: Path, minutes: float, out: Path = OUT) -> Path:
    """out/name/run: preprocessed, trained for `minutes` (0: as the recipe says), averaged; reused when its average
    exists."""
    base = out / name
    run = base / "run"
    if (run / "average.pt").is_file():
        return run
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    checked(measure(mtkit("preprocess", *preprocess, "--out", str(base / "data")), base / "preprocess"), "preprocess")
    checked(
        measure(
            mtkit(
                "train", str(base / "data"), "--save-dir", str(run), "--config", str(recipe), "--max-time", str(minutes)
            ),
            base / "train",
        ),
        "train",
    )
    checked(measure(mtkit("average", str(run)), base / "average"), "average")  # the recipe's train.average_last
    return run


def updates(run: Path) -> int:
    steps = [json.loads(line).get("step", 0) for line in (run / "metrics.jsonl").read_text().splitlines() if line]
    return max(steps, default=0)


def bleu(
    run: Path,
    target: str,
    multilingual: bool,
    source_lang: str = "en",
    out: Path = OUT,
    options: Sequence[str] = (),
    split: str = "test_2016_flickr",
    tag: str = "",
) -> float:
    """sacreBLEU of the run's translation (beam 4) of a Multi30k split; `tag` tells apart the translations of one run
    scored at several points of its training."""
    import sacrebleu

    short = "test" if split == "test_2016_flickr" else split
    source = out / f"{short}.{source_lang}"
    if not source.is_file():
        write_lines(source, read_lines(MULTI30K / f"{split}.{source_lang}.gz"))
    name = (target if source_lang == "en" else f"{source_lang}-{target}") + (f"-{tag}" if tag else "")
    hyp = run.parent / f"{short}.hyp.{name}"
    lang = ["--target-lang", target] if multilingual else []
    checked(
        measure(
            mtkit("translate", str(run), "--beam", "4", *lang, *options, "-q", "-i", str(source), "-o", str(hyp)),
            run.parent / f"translate-{short}-{name}",
        ),
        "translate",
    )
    refs = read_lines(MULTI30K / f"{split}.{target}.gz")
    return round(sacrebleu.corpus_bleu(hyp.read_text(encoding="utf-8").splitlines(), [refs]).score, 2)


def bilingual_run(target: str, minutes: float) -> Path:
    files = [
        "--source-lang",
        "en",
        "--target-lang",
        target,
        "--train",
        str(MULTI30K / "train"),
        "--valid",
        str(MULTI30K / "val"),
        "--test",
        str(MULTI30K / "test_2016_flickr"),
    ]
    return trained(f"en-{target}", ["--config", str(BILINGUAL), *files], BILINGUAL, minutes)


def many_to_many(minutes: float) -> None:
    """The 12-direction model's sacreBLEU in every direction; en -> xx beside the en-xx model's when it exists."""
    many = trained("many", ["--config", str(MANY)], MANY, minutes)
    en_xx = OUT / "en-xx" / "run"
    rows = []
    for source in LANGS:
        for target in LANGS:
            if source == target:
                continue
            row = {
                "direction": f"{source}-{target}",
                f"many-to-many ({minutes:g} min) BLEU": bleu(many, target, True, source),
            }
            if source == "en" and (en_xx / "average.pt").is_file():
                row["en -> de, fr, cs model BLEU"] = bleu(en_xx, target, True)
            rows.append(row)
    write_results(
        "multilingual-many",
        {"minutes": minutes, "updates": updates(many), "en-xx updates": updates(en_xx) if en_xx.is_dir() else None},
        rows,
    )


def run(args: argparse.Namespace) -> None:
    minutes = args.minutes
    part = args.part or "all"
    if part == "many":
        many_to_many(minutes)
        return
    runs = {}
    if part in ("all", "bilingual"):
        runs.update({t: bilingual_run(t, minutes / len(TARGETS)) for t in TARGETS})
    if part in ("all", "multilingual"):
        runs["multi"] = trained("en-xx", ["--config", str(MULTILINGUAL)], MULTILINGUAL, minutes)
    if part != "all":
        return
    rows = []
    for target in TARGETS:
        rows.append(
            {
                "direction": f"en-{target}",
                f"bilingual ({minutes / len(TARGETS):g} min) BLEU": bleu(runs[target], target, False),
                "bilingual updates": updates(runs[target]),
                f"multilingual ({minutes:g} min) BLEU": bleu(runs["multi"], target, True),
                "multilingual updates": updates(runs["multi"]),
            }
        )
    write_results("multilingual", {"minutes": minutes}, rows)
