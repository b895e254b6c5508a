"""A synthetic WMT-sized parallel corpus: each pair joins two random Multi30k pairs (about 25 words a side).

Multi30k sentences average ~12-13 words, about half of a WMT news sentence, so two of them side by side give
WMT-like lengths; the word vocabulary stays Multi30k's (~30k types), which flatters sentencepiece training and
encoding caches against real text (BENCHMARKS.md says by how much where it matters). Seeded: the same
arguments write the same bytes. Streams its output in chunks, so memory stays at the source corpus plus one chunk.

  python benchmarks/make_synthetic_corpus.py --pairs 4500000 --out synth --prefix train
  python benchmarks/make_synthetic_corpus.py --pairs 3000 --splits test_2016_flickr,val --out DIR --prefix test
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path
from typing import BinaryIO

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "data" / "multi30k"
CHUNK = 100_000  # pairs per write: ~15 MB of text a side


def read_split_lines(source: Path, splits: list[str], lang: str) -> list[bytes]:
    """The lines (without newline, stripped) of the named splits, concatenated in order."""
    lines: list[bytes] = []
    for split in splits:
        path = source / f"{split}.{lang}.gz"
        if not path.is_file():
            raise SystemExit(f"{path}: no such file (Multi30k split {split!r}, language {lang!r})")
        with gzip.open(path, "rb") as handle:  # lines end at "\n" only, as everywhere in mtkit
            lines += [line.strip() for line in handle.read().removesuffix(b"\n").split(b"\n")]
    return lines


def open_output(path: Path, compress: bool) -> BinaryIO:
    # Level 1: gzip's default level 6 would make writing, not drawing, the slow part (~3x slower, ~10% smaller).
    return gzip.open(path, "wb", compresslevel=1) if compress else open(path, "wb")


def write_corpus(
    source: Path, splits: list[str], langs: list[str], pairs: int, seed: int, out: Path, prefix: str, compress: bool
) -> dict:
    """Write OUT/PREFIX.<lang>[.gz] for every language; returns a summary (paths, pairs, words per side)."""
    texts = {lang: read_split_lines(source, splits, lang) for lang in langs}
    sizes = {len(lines) for lines in texts.values()}
    if len(sizes) != 1:
        raise SystemExit(f"{source}: the languages {langs} of {splits} have different line counts {sorted(sizes)}")
    n_source = sizes.pop()
    out.mkdir(parents=True, exist_ok=True)
    suffix = ".gz" if compress else ""
    paths = {lang: out / f"{prefix}.{lang}{suffix}" for lang in langs}
    handles = {lang: open_output(path, compress) for lang, path in paths.items()}
    rng = np.random.default_rng(seed)
    words = {lang: 0 for lang in langs}
    try:
        for start in range(0, pairs, CHUNK):
            picks = rng.integers(0, n_source, size=(min(CHUNK, pairs - start), 2)).tolist()  # [n, 2] line indices
            for lang, handle in handles.items():
                lines = texts[lang]
                block = b"\n".join([lines[i] + b" " + lines[j] for i, j in picks]) + b"\n"
                words[lang] += block.count(b" ") + len(picks)  # words = spaces + 1 per line
                handle.write(block)
    finally:
        for handle in handles.values():
            handle.close()
    return {
        "paths": {lang: str(path) for lang, path in paths.items()},
        "pairs": pairs,
        "seed": seed,
        "source": str(source),
        "splits": splits,
        "source_pairs": n_source,
        "mean_words": {lang: round(count / max(pairs, 1), 2) for lang, count in words.items()},
        "bytes": {lang: path.stat().st_size for lang, path in paths.items()},
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--prefix", default="train", help="files OUT/PREFIX.<lang> (default train)")
    parser.add_argument("--pairs", type=int, default=4_500_000, help="pairs to write (default 4,500,000: WMT14 en-de)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--source", type=Path, default=SOURCE, help="Multi30k directory (*.gz; default data/multi30k)")
    parser.add_argument("--splits", default="train", help="comma-separated Multi30k splits to draw from")
    parser.add_argument("--langs", default="en,de", help="comma-separated languages (each split.<lang>.gz)")
    parser.add_argument("--gzip", action="store_true", help="write PREFIX.<lang>.gz (level 1) instead of plain text")
    args = parser.parse_args(argv)
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    start = time.perf_counter()
    summary = write_corpus(
        args.source,
        args.splits.split(","),
        args.langs.split(","),
        args.pairs,
        args.seed,
        args.out,
        args.prefix,
        args.gzip,
    )
    summary["seconds"] = round(time.perf_counter() - start, 2)
    json.dump(summary, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
