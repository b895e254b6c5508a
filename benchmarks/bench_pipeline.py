"""Input pipeline speed: epoch_batches + collate over Multi30k train, the model replaced by a no-op.

Reports batches/s and tokens/s to compare with a training step (about 0.7-1.5 s per 4096-token batch
on CPU), padding efficiency, and make_batches on 4.5M random lengths (WMT14 en-de size).
Usage: python benchmarks/bench_pipeline.py [--data DATA_DIR] [--max-tokens 4096] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from mtkit.batching import epoch_batches, make_batches, padding_efficiency
from mtkit.data import ParallelData, collate, read_manifest
from mtkit.preprocess import PreprocessConfig, preprocess

MULTI30K = Path(__file__).resolve().parents[1] / "data" / "multi30k"


def multi30k_data(work: Path) -> Path:
    """Multi30k en-de preprocessed as the recipe does (vocab 8000)."""
    cfg = PreprocessConfig("en", "de", train=str(MULTI30K / "train"), valid=str(MULTI30K / "val"))
    preprocess(cfg, work / "data")
    return work / "data"


def time_pipeline(data: ParallelData, max_tokens: int, epochs: int, device: str) -> dict:
    start = time.perf_counter()
    batches = epoch_batches(data.src_lens, data.tgt_lens, max_tokens, seed=1, epoch=0)
    sampler_seconds = time.perf_counter() - start
    count = src_tokens = tgt_tokens = 0
    start = time.perf_counter()
    for epoch in range(epochs):
        for indices in epoch_batches(data.src_lens, data.tgt_lens, max_tokens, seed=1, epoch=epoch):
            batch = collate(data, indices).to(device)  # the model step would go here
            count += 1
            src_tokens += batch.src_tokens
            tgt_tokens += batch.tgt_tokens
    seconds = time.perf_counter() - start
    return {
        "sentences": len(data),
        "max_tokens": max_tokens,
        "batches_per_epoch": len(batches),
        "padding_efficiency": round(padding_efficiency(batches, data.src_lens, data.tgt_lens), 4),
        "epoch_batches_seconds": round(sampler_seconds, 4),
        "batches_per_s": round(count / seconds, 1),
        "tgt_tokens_per_s": round(tgt_tokens / seconds),
        "src_plus_tgt_tokens_per_s": round((src_tokens + tgt_tokens) / seconds),
        "ms_per_batch": round(1000 * seconds / count, 3),
    }


def time_sampler(sentences: int, max_tokens: int) -> dict:
    rng = np.random.default_rng(0)
    src = rng.integers(1, 120, sentences)
    tgt = np.clip((src * rng.uniform(0.8, 1.25, sentences)).astype(np.int64), 1, 256)
    start = time.perf_counter()
    batches = make_batches(src, tgt, max_tokens, seed=1, epoch=0)
    return {
        "sentences": sentences,
        "batches": len(batches),
        "make_batches_seconds": round(time.perf_counter() - start, 3),
        "padding_efficiency": round(padding_efficiency(batches, src, tgt), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="a DATA_DIR from `mtkit preprocess` (default: Multi30k, built now)")
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="collated batches are moved here (cpu, cuda)")
    parser.add_argument("--sampler-sentences", type=int, default=4_500_000)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        data_dir = args.data or multi30k_data(Path(tmp))
        manifest = read_manifest(data_dir)
        data = ParallelData.open(data_dir, "train", manifest["source_lang"], manifest["target_lang"])
        report = {
            "pipeline": time_pipeline(data, args.max_tokens, args.epochs, args.device),
            "sampler": time_sampler(args.sampler_sentences, args.max_tokens),
        }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    pipe, sampler = report["pipeline"], report["sampler"]
    print(f"train: {pipe['sentences']} pairs, {pipe['batches_per_epoch']} batches of <= {args.max_tokens} tokens")
    sampler_ms = pipe["epoch_batches_seconds"] * 1000
    print(f"  epoch_batches: {sampler_ms:.1f} ms, padding efficiency {pipe['padding_efficiency']}")
    print(f"  collate: {pipe['batches_per_s']} batches/s, {pipe['tgt_tokens_per_s']} target tokens/s, "
          f"{pipe['ms_per_batch']} ms/batch ({pipe['ms_per_batch'] / 7:.2f}% of a 0.7 s training step)")
    print(f"make_batches on {sampler['sentences']} random lengths: {sampler['make_batches_seconds']} s, "
          f"{sampler['batches']} batches, padding efficiency {sampler['padding_efficiency']}")


if __name__ == "__main__":
    main()
