"""Forced scoring (`mtkit score-pairs`): the log-probability a model gives each existing (source, target) pair,
streamed in input order, with either engine. The sum counts every target piece and the end of sentence, in
natural log, as the search scores a hypothesis before any length penalty.

Torch-free: the engine (mtkit.engines.contract's Translating.score_ids) does the model's part. Sharded
(mtkit.bulk.shards), the scores go to a file, resumable.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mtkit.bulk.resumable import ResumableOutputs, translator_identity
from mtkit.bulk.shard_sets import Shard
from mtkit.bulk.shards import ShardSpec, count_pairs, read_pair_chunks
from mtkit.engines.contract import Translating, source_codes
from mtkit.errors import UserError
from mtkit.files import read_lines

CHUNK_PAIRS = 1000  # pairs read and scored at a time: output keeps pace with the input, memory stays flat


@dataclass
class PairScore:
    """One pair's answer: its score, or why it has none (an empty side, a side longer than the model takes)."""

    score: float | None  # sum of natural-log probabilities of the target's pieces and its end of sentence
    tokens: int  # target pieces scored, the end of sentence included (0 when not scored)
    pieces: list[float] | None = None
    error: str | None = None

    @property
    def mean(self) -> float | None:
        return None if self.score is None else self.score / self.tokens

    def as_line(self, as_json: bool, with_pieces: bool) -> str:
        """`score` as text ("nan" for a pair without one), or one JSON object: score, tokens, mean [, pieces, error]."""
        if not as_json:
            return "nan" if self.score is None else f"{self.score:.6f}"
        row: dict = {"score": self.score, "tokens": self.tokens, "mean": self.mean}
        if with_pieces:
            row["pieces"] = self.pieces
        if self.error:
            row["error"] = self.error
        return json.dumps(row)


def score_pairs(translator: Translating, sources: list[str], targets: list[str]) -> list[PairScore]:
    """One PairScore per pair, in order. Sides are stripped as preprocess strips training text; a multilingual
    model's source starts with the code of cfg.target_lang (or the line's own, as mtkit translate encodes it); a pair
    with an empty side, or a side over the model's length, is answered with its reason instead of a truncated
    score."""
    codes, texts = source_codes(translator.tokenizer, sources, translator.cfg.target_lang)  # a multilingual model's
    src = [
        [code, *ids] if code is not None and ids else ids
        for code, ids in zip(codes, translator.tokenizer.encode(texts))
    ]
    tgt = translator.tokenizer.encode_target([line.strip() for line in targets])
    longest = translator.max_source_tokens  # the decoder's positions hold the same: start token + target
    answers: list[PairScore | None] = []
    for s, t in zip(src, tgt):
        problem = (
            "empty source"
            if not s
            else "empty target"
            if not t
            else f"source has {len(s)} pieces, over the model's {longest}"
            if len(s) > longest
            else f"target has {len(t)} pieces, over the model's {longest}"
            if len(t) > longest
            else None
        )
        answers.append(PairScore(None, 0, None, problem) if problem else None)
    todo = [i for i, answer in enumerate(answers) if answer is None]
    for index, logprobs in zip(todo, translator.score_ids([src[i] for i in todo], [tgt[i] for i in todo])):
        answers[index] = PairScore(sum(logprobs), len(logprobs), list(logprobs))
    return [answer for answer in answers if answer is not None]


def read_pairs(source: Path, target: Path, chunk: int = CHUNK_PAIRS) -> Iterator[tuple[list[str], list[str]]]:
    """(sources, targets) chunks of two line-aligned files, streaming; files of different lengths are an error
    naming both, raised when the shorter one ends (the chunks before it were whole pairs)."""
    missing = object()
    pairs = itertools.zip_longest(read_lines(source), read_lines(target), fillvalue=missing)
    lineno = 0
    while batch := list(itertools.islice(pairs, chunk)):
        for offset, (s, t) in enumerate(batch):
            if s is missing or t is missing:
                shorter, longer = (source, target) if s is missing else (target, source)
                raise UserError(f"{shorter} has {lineno + offset} lines, {longer} more: the files must be line-aligned")
        lineno += len(batch)
        yield [s for s, _ in batch], [t for _, t in batch]  # type: ignore[misc]


def score_pair_files(
    translator: Translating,
    source: Path,
    target: Path,
    out: IO[str],
    as_json: bool = False,
    with_pieces: bool = False,
    chunk: int = CHUNK_PAIRS,
) -> dict[str, int]:
    """Score every pair of two files onto `out`, one line per pair, flushed per chunk; returns the counts."""
    counts = {"pairs": 0, "scored": 0, "unscored": 0}
    for sources, targets in read_pairs(source, target, chunk):
        answers = score_pairs(translator, sources, targets)
        out.write("".join(answer.as_line(as_json, with_pieces) + "\n" for answer in answers))
        out.flush()
        counts["pairs"] += len(answers)
        counts["unscored"] += sum(answer.score is None for answer in answers)
    counts["scored"] = counts["pairs"] - counts["unscored"]
    return counts


def score_pair_shard(
    translator: Translating,
    source: Path,
    target: Path,
    output: Path,
    spec: ShardSpec,
    options: dict[str, Any],
    as_json: bool = False,
    with_pieces: bool = False,
    chunk: int = CHUNK_PAIRS,
    overwrite: bool = False,
) -> dict[str, Any]:
    """`score-pairs --output OUTPUT --shard K/N`: shard `spec`'s pairs scored into OUTPUT.shard-K-of-N, the lines
    score_pair_files writes for them, chunk by chunk and resumable after a kill; the shard that completes the set
    merges it into OUTPUT. Returns the counts of this run and the shard's summary."""
    identity = translator_identity(translator, {"source": source, "target": target}, options)
    shard = Shard(output, spec, [output], "score-pairs", identity, count_pairs(source, target), chunk)
    counts = {"pairs": 0, "scored": 0, "unscored": 0}
    if overwrite or not shard.already_done():
        shard.begin()
        outputs = ResumableOutputs(shard.progress, shard.files, shard.resume_identity(), overwrite)
        for sources, targets in read_pair_chunks(source, target, shard.start + outputs.done, shard.end, chunk):
            answers = score_pairs(translator, sources, targets)
            outputs.append(["".join(answer.as_line(as_json, with_pieces) + "\n" for answer in answers)], len(answers))
            counts["pairs"] += len(answers)
            counts["unscored"] += sum(answer.score is None for answer in answers)
    counts["scored"] = counts["pairs"] - counts["unscored"]
    return {**counts, **shard.finish()}
