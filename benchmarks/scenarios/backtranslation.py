"""Back-translation (Sennrich et al. 2016) on Multi30k: train en -> de on half A of the training pairs (the first
14,500) alone, and beside half B's German back-translated by a de -> en model trained on A, with beam 4 or by
sampling (`mtkit back-translate`'s default: the whole distribution, top_k 0, top_p 1, temperature 1, seed 1;
CTranslate2 with its native search), untagged or tagged "<bt>" (Caswell et al. 2019). Each model is trained for
--minutes with recipes/multi30k-en-de/small.toml, averaged over its last 3 checkpoints and scored as the
multilingual scenario scores: test_2016_flickr, torch engine, beam 4, sacreBLEU; the de -> en model too.

Everything lives in bench-out/backtranslation/; trained models and finished back-translations are reused, so a
killed run goes on. --lines N back-translates only B's first N lines (a quick check of the scenario, kept apart
under its own names), not the experiment.
"""

from __future__ import annotations

import argparse
import gzip
import json
import tomllib
from pathlib import Path

from harness import WORK, checked, measure, write_results

from scenarios.multilingual import BILINGUAL, bleu, trained, updates
from scenarios.workload import MULTI30K, mtkit

OUT = WORK / "backtranslation"
HALF = 14_500  # pairs in A; B is the other 14,500 of train's 29,000
TAG = "<bt>"
SEARCHES = {"beam": ["--beam", "4"], "sampled": []}  # back-translate's options; sampling is its default
# en -> de variants: (name, back-translation search or None for A alone, tagged)
VARIANTS = (
    ("A", None, False),
    ("A + B beam", "beam", False),
    ("A + B beam, tagged", "beam", True),
    ("A + B sampled", "sampled", False),
    ("A + B sampled, tagged", "sampled", True),
)


def _write(path: Path, lines: list[str]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    tmp.replace(path)


def halves(lines: int | None) -> tuple[Path, Path]:
    """OUT/data/A.{en,de}, the first HALF pairs of train, and OUT/data/B[-N].de, the German of the rest (its
    first `lines` when given): A's file prefix and B's German file."""
    data = OUT / "data"
    a, b = data / "A", data / (f"B-{lines}.de" if lines else "B.de")
    if not (Path(f"{a}.en").is_file() and Path(f"{a}.de").is_file() and b.is_file()):
        data.mkdir(parents=True, exist_ok=True)
        text = {}
        for lang in ("en", "de"):
            with gzip.open(MULTI30K / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
                text[lang] = f.readlines()
            _write(Path(f"{a}.{lang}"), text[lang][:HALF])
        _write(b, text["de"][HALF:][:lines])
    return a, b


def back_translated(reverse: Path, mono: Path, search: str) -> tuple[Path, dict]:
    """PREFIX.en + PREFIX.de: `mono` back-translated by the de -> en run; the prefix and the command's summary
    with its wall time. A finished back-translation is reused, an unfinished one goes on where it stopped."""
    prefix = OUT / "bt" / f"{mono.stem}-{search}"
    summary = Path(f"{prefix}.summary.json")
    if not summary.is_file():
        cmd = mtkit("back-translate", str(reverse), "-i", str(mono), "-o", str(prefix), *SEARCHES[search], "--json")
        m = checked(measure(cmd, prefix.parent / f"{prefix.name}.log"), f"back-translate ({search})")
        summary.write_text(json.dumps({**json.loads(m.stdout.splitlines()[-1]), "wall_s": m.wall_s}) + "\n")
    return prefix, json.loads(summary.read_text())


def corpora_recipe(name: str, corpora: list[dict]) -> Path:
    """OUT/recipes/NAME.toml: small.toml's [preprocess] with `corpora` as its [[preprocess.corpora]], not train."""
    recipe = tomllib.loads(BILINGUAL.read_text(encoding="utf-8"))
    # Its values are strings, numbers and lists of strings, which JSON writes as TOML does.
    lines = ["[preprocess]", *(f"{k} = {json.dumps(v)}" for k, v in recipe["preprocess"].items() if k != "train")]
    for corpus in corpora:
        lines += ["", "[[preprocess.corpora]]", *(f"{k} = {json.dumps(v)}" for k, v in corpus.items())]
    path = OUT / "recipes" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    _write(path, [line + "\n" for line in lines])
    return path


def en_de(name: str, corpora: list[dict], minutes: float) -> dict:
    """The row of an en -> de model trained on `corpora` (weight 1 each: every pair once an epoch)."""
    run_dir = trained(name, ["--config", str(corpora_recipe(name, corpora))], BILINGUAL, minutes, OUT)
    return {"direction": "en-de", "updates": updates(run_dir), "sacreBLEU": bleu(run_dir, "de", False, "en", OUT)}


def run(args: argparse.Namespace) -> None:
    minutes = args.minutes
    a, b = halves(args.lines)
    files = ["--train", str(a), "--valid", str(MULTI30K / "val"), "--test", str(MULTI30K / "test_2016_flickr")]
    reverse = trained(
        "de-en-A",
        ["--config", str(BILINGUAL), "--source-lang", "de", "--target-lang", "en", *files],
        BILINGUAL,
        minutes,
        OUT,
    )
    bt = {search: back_translated(reverse, b, search) for search in SEARCHES}
    rows = [
        {
            "variant": "de -> en on A (the back-translator)",
            "direction": "de-en",
            "updates": updates(reverse),
            "sacreBLEU": bleu(reverse, "en", False, "de", OUT),
        }
    ]
    real = {"name": "A", "train": str(a), "weight": 1.0}
    for variant, search, tagged in VARIANTS:
        corpora = [real]
        if search:
            synthetic = {"name": "bt", "train": str(bt[search][0]), "weight": 1.0}
            corpora.append({**synthetic, "tag": TAG} if tagged else synthetic)
        name = "-".join(["en-de-A", *([f"{b.stem}-{search}"] if search else []), *(["tagged"] if tagged else [])])
        rows.append({"variant": variant, **en_de(name, corpora, minutes)})
    report = {
        "minutes": minutes,
        "pairs_A": HALF,
        "lines_B": len(b.read_text(encoding="utf-8").splitlines()),
        "tag": TAG,
        "back_translation": {search: summary for search, (_, summary) in bt.items()},
    }
    write_results("backtranslation", report, rows)
