"""Translate a text file with an `mtkit export` CTranslate2 model, using ctranslate2 and sentencepiece only.

The bare CTranslate2 baseline of the translate scenario, run as its own process: no mtkit and no torch are imported, so
its start-up is CTranslate2's. It reads raw lines, encodes them with the export's spm.model, translates, decodes
and writes one line per input (empty stays empty), as `mtkit translate` does, and logs on stderr, as mtkit does,
`translated N lines in X s`, timed from after the model load to the last line written.

--settings matched: mtkit's settings. Beam and maximum length from the export's mtkit.json: at most
  M = floor(a * source pieces + b) pieces, M + 1 decoding steps with the end token; CTranslate2 takes one
  maximum length per call, so sentences are translated in groups of equal M. No length penalty, and no
  minimum length (mtkit allows an empty output). CTranslate2's stopping rule: a sentence ends when its best
  beam does, where mtkit's search goes on until `beam` hypotheses have ended (a few lines differ).
--settings search: as matched, with mtkit's stopping rule too: `beam` hypotheses per sentence with raw scores
  (a length penalty of 1e-30, as `mtkit translate --engine ctranslate2` asks); the first is the best at alpha 0.
  The decoding work of `--engine ctranslate2` at length penalty 0, without its Python around it.
--settings native: what `mtkit translate --engine ctranslate2 --ct2-search native` asks of CTranslate2: its own
  search at --length-penalty (default: the export's), batches of length-sorted sentences with n * (longest + 1) <=
  --batch-tokens, one call each, decoded to at most the batch's longest M.
--settings defaults: CTranslate2's own defaults (length_penalty 1, max_decoding_length 256, min_decoding_length 1)
  with the same beam.
All batch by --batch-tokens source tokens (mtkit's default is 4,000). --inter-threads N: N batches at once, each
on --threads / N threads (CTranslate2's inter_threads; mtkit's --workers).
Usage: python benchmarks/ct2_translate_export.py MODEL_DIR INPUT OUTPUT [--compute-type float32|int8]
       [--threads 2] [--inter-threads 1] [--settings matched|search|native|defaults] [--batch-tokens 4000]
       [--length-penalty ALPHA]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import ctranslate2
import sentencepiece as spm


def matched_translate(
    translator: ctranslate2.Translator,
    pieces: list[list[str]],
    search: dict,
    batch_tokens: int,
    max_tokens: int,
    all_hypotheses: bool = False,
) -> list[list[str]]:
    """mtkit's settings: beam, no length penalty, each sentence's own maximum length (groups of equal M);
    `all_hypotheses`: mtkit's stopping rule too (`beam` hypotheses, raw scores)."""
    stopping = (
        {"num_hypotheses": search["beam"], "return_scores": True, "length_penalty": 1e-30}
        if all_hypotheses
        else {"length_penalty": 0}
    )
    groups: dict[int, list[int]] = defaultdict(list)
    for index, source in enumerate(pieces):
        limit = math.floor(search["max_len_a"] * len(source) + search["max_len_b"])
        groups[min(limit, max_tokens)].append(index)  # mtkit also stops at the decoder's last position
    outputs: list[list[str]] = [[] for _ in pieces]
    # Every group is submitted before any result is read, so that with inter_threads > 1 batches of several groups
    # run at once, as one translate_batch call's batches do.
    submitted = [
        (
            indices,
            translator.translate_batch(
                [pieces[i] for i in indices],
                beam_size=search["beam"],
                min_decoding_length=0,
                max_decoding_length=limit + 1,
                max_input_length=0,
                max_batch_size=batch_tokens,
                batch_type="tokens",
                asynchronous=True,
                **stopping,
            ),
        )
        for limit, indices in sorted(groups.items())
    ]
    for indices, results in submitted:
        for index, result in zip(indices, results):
            outputs[index] = result.result().hypotheses[0]
    return outputs


def native_translate(
    translator: ctranslate2.Translator,
    pieces: list[list[str]],
    search: dict,
    batch_tokens: int,
    max_tokens: int,
) -> list[list[str]]:
    """CTranslate2's own search, batched as mtkit's --ct2-search native batches
    (mtkit.engines.streaming.length_batches)."""
    batches: list[list[int]] = []
    for index in sorted(range(len(pieces)), key=lambda i: (len(pieces[i]), i)):
        if batches and (len(batches[-1]) + 1) * (len(pieces[index]) + 1) <= batch_tokens:
            batches[-1].append(index)
        else:
            batches.append([index])
    submitted = [
        (
            batch,
            translator.translate_batch(
                [pieces[i] for i in batch],
                beam_size=search["beam"],
                length_penalty=search["length_penalty"],
                min_decoding_length=0,
                max_input_length=0,
                asynchronous=True,
                max_decoding_length=max(
                    1, min(math.floor(search["max_len_a"] * len(pieces[batch[-1]]) + search["max_len_b"]), max_tokens)
                ),
            ),
        )
        for batch in batches
    ]
    outputs: list[list[str]] = [[] for _ in pieces]
    for batch, results in submitted:
        for index, result in zip(batch, results):
            outputs[index] = result.result().hypotheses[0]
    return outputs


def default_translate(
    translator: ctranslate2.Translator,
    pieces: list[list[str]],
    search: dict,
    batch_tokens: int,
    max_tokens: int,
) -> list[list[str]]:
    results = translator.translate_batch(
        pieces, beam_size=search["beam"], max_batch_size=batch_tokens, batch_type="tokens"
    )
    return [result.hypotheses[0] for result in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("input", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--compute-type", default="float32")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--inter-threads", type=int, default=1, help="batches at once (each on threads / this)")
    parser.add_argument("--settings", choices=("matched", "search", "native", "defaults"), default="matched")
    parser.add_argument("--batch-tokens", type=int, default=4000)
    parser.add_argument("--length-penalty", type=float, help="native: CTranslate2's alpha (default: the export's)")
    args = parser.parse_args()
    metadata = json.loads((args.model / "mtkit.json").read_text(encoding="utf-8"))
    if args.length_penalty is not None:
        metadata["search"]["length_penalty"] = args.length_penalty
    translator = ctranslate2.Translator(
        str(args.model),
        device="cpu",
        compute_type=args.compute_type,
        inter_threads=args.inter_threads,
        intra_threads=max(1, args.threads // args.inter_threads),
    )
    sp = spm.SentencePieceProcessor(model_file=str(args.model / "spm.model"))
    start = time.monotonic()
    lines = args.input.read_text(encoding="utf-8").split("\n")
    lines = lines[:-1] if lines and lines[-1] == "" else lines
    pieces = [p[: metadata["max_source_tokens"]] for p in sp.encode([line.strip() for line in lines], out_type=str)]
    keep = [i for i, p in enumerate(pieces) if p]  # an empty line translates to an empty line, as in mtkit
    inputs = [pieces[i] for i in keep]
    if args.settings == "defaults":
        hyps = default_translate(
            translator, inputs, metadata["search"], args.batch_tokens, metadata["max_source_tokens"]
        )
    elif args.settings == "native":
        hyps = native_translate(
            translator, inputs, metadata["search"], args.batch_tokens, metadata["max_source_tokens"]
        )
    else:
        hyps = matched_translate(
            translator,
            inputs,
            metadata["search"],
            args.batch_tokens,
            metadata["max_source_tokens"],
            all_hypotheses=args.settings == "search",
        )
    outputs = [""] * len(lines)
    for index, text in zip(keep, sp.decode(hyps) if hyps else []):
        outputs[index] = text.replace("\r", " ").replace("\n", " ")
    args.output.write_text("".join(line + "\n" for line in outputs), encoding="utf-8")
    seconds = time.monotonic() - start
    print(
        f"translated {len(lines)} lines in {seconds:.2f}s ({len(lines) / max(seconds, 1e-9):.1f} sent/s) "
        f"ctranslate2 {ctranslate2.__version__} {args.compute_type} {args.settings}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
