"""Shared fixtures: the shipped Multi30k en-de data and small slices of it."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MULTI30K = ROOT / "data" / "multi30k"

# Tests run on 2 cores next to other work; one intra-op thread keeps them predictable.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def read_gz_lines(path: Path, limit: int | None = None) -> list[str]:
    """First `limit` lines of a gzip text file, without newlines."""
    lines = []
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as handle:
        for i, line in enumerate(handle):
            if limit is not None and i >= limit:
                break
            lines.append(line.rstrip("\n"))
    return lines


@pytest.fixture(scope="session")
def multi30k() -> Path:
    """Directory with train/val/test_2016_flickr .en.gz/.de.gz."""
    return MULTI30K


def write_slice(src_dir: Path, split: str, out_prefix: Path, n: int, langs=("en", "de")) -> Path:
    """Write the first n lines of a Multi30k split as plain PREFIX.en / PREFIX.de files."""
    for lang in langs:
        lines = read_gz_lines(src_dir / f"{split}.{lang}.gz", n)
        Path(f"{out_prefix}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out_prefix
