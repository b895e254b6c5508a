"""A fixed amount of CTranslate2 decoding, timed: the same sentences, every one decoded exactly --steps steps.

The child process of the int8 scenario. A model's speed at a compute type, thread count, beam and batch size
without its translations' lengths in it (min_decoding_length = max_decoding_length), so models of random weights
and any width compare. Prints `RESULT {"decode_s": ..., "load_s": ...}` and, with CT2_VERBOSE=1 in the
environment, CTranslate2's own lines on stderr (its ISA and GEMM backends). ctranslate2 only.
Usage: python benchmarks/ct2_fixed_work.py MODEL_DIR --compute-type int8 [--threads 2] [--workers 1] [--beam 4]
       [--batch 32] [--sentences 512] [--source-len 14] [--steps 16]
"""

from __future__ import annotations

import argparse
import json
import random
import time

import ctranslate2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir")
    parser.add_argument("--compute-type", default="float32")
    parser.add_argument("--threads", type=int, default=2, help="threads per batch (intra_threads)")
    parser.add_argument("--workers", type=int, default=1, help="batches decoded at once (inter_threads)")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--source-len", type=int, default=14)
    parser.add_argument("--steps", type=int, default=16)
    args = parser.parse_args()
    start = time.perf_counter()
    translator = ctranslate2.Translator(
        args.model_dir,
        device="cpu",
        compute_type=args.compute_type,
        intra_threads=args.threads,
        inter_threads=args.workers,
    )
    load_s = time.perf_counter() - start
    with open(f"{args.model_dir}/pieces.json", encoding="utf-8") as handle:
        pieces = json.load(handle)  # ordinary pieces only: no specials in a source
    draw = random.Random(0)
    sources = [[draw.choice(pieces) for _ in range(args.source_len)] for _ in range(args.sentences)]
    start = time.perf_counter()
    translator.translate_batch(
        sources,
        max_batch_size=args.batch,
        beam_size=args.beam,
        min_decoding_length=args.steps,
        max_decoding_length=args.steps,
    )
    decode_s = time.perf_counter() - start
    print("RESULT " + json.dumps({"decode_s": round(decode_s, 4), "load_s": round(load_s, 4)}), flush=True)


if __name__ == "__main__":
    main()
