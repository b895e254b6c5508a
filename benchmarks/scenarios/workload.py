"""The inputs every CPU scenario shares: Multi30k en-de preprocessed once (joint BPE 8,000) and a model
trained a few updates to translate and serve with. Kept under bench-out/ and reused by later runs."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from harness import ROOT, WORK, checked, measure

RECIPE = ROOT / "recipes" / "multi30k-en-de" / "small.toml"
MULTI30K = ROOT / "data" / "multi30k"
# The peers' "multi30k-small" workload is fixed, whatever the demo recipe later tuned.
WORKLOAD = [
    "--set",
    "train.max_tokens=4096",
    "--set",
    "train.warmup_steps=1000",
    "--set",
    "train.lr=1e-3",
    "--set",
    "model.dropout=0.1",
    "--set",
    "train.lr_schedule=inverse_sqrt",
]


def mtkit(*args: str) -> list[str]:
    return [sys.executable, "-m", "mtkit", *args]


def preprocess_command(out: Path, workers: int, pairs: Path = MULTI30K / "train") -> list[str]:
    return mtkit(
        "preprocess",
        "--source-lang",
        "en",
        "--target-lang",
        "de",
        "--train",
        str(pairs),
        "--valid",
        str(MULTI30K / "val"),
        "--test",
        str(MULTI30K / "test_2016_flickr"),
        "--vocab-size",
        "8000",
        "--workers",
        str(workers),
        "--out",
        str(out),
    )


def data() -> Path:
    """bench-out/data: the workload, preprocessed once."""
    out = WORK / "data"
    if not (out / "manifest.json").is_file():
        shutil.rmtree(out, ignore_errors=True)
        checked(measure(preprocess_command(out, 2), WORK / "logs" / "data"), "mtkit preprocess")
    return out


def model(updates: int) -> Path:
    """A run of `updates` updates of the recipe's small model: enough to translate, not to translate well."""
    run = WORK / f"model-{updates}"
    if not any(run.glob("checkpoint*.pt")):
        shutil.rmtree(run, ignore_errors=True)
        cmd = mtkit("train", str(data()), "--save-dir", str(run), "--config", str(RECIPE), "--max-steps", str(updates))
        checked(measure(cmd + WORKLOAD, WORK / "logs" / f"model-{updates}"), "mtkit train")
    return run


def test_source(lines: int) -> Path:
    """The first `lines` English lines of test_2016_flickr as a plain file."""
    import gzip

    path = WORK / f"test-{lines}.en"
    if not path.is_file():
        with gzip.open(MULTI30K / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as f:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(line for _, line in zip(range(lines), f)), encoding="utf-8")
    return path
