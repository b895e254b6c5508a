"""Dual conditional cross-entropy filtering (Junczys-Dowmunt 2018, `mtkit filter-pairs`): each pair of a parallel
corpus is scored by a forward model, H_A(y|x), and a backward one, H_B(x|y), both per-token cross-entropies
(-log-probability / pieces scored, end of sentence included), and rated exp(-(|H_A - H_B| + (H_A + H_B) / 2)):
near 1 when both models find the pair likely and agree, near 0 otherwise. The best fraction, or the pairs over a
threshold, are kept. Scoring is resumable (mtkit.bulk.resumable) and can be sharded (mtkit.bulk.shards): the set's
scores merged, the selection reads them back, all of them, and is quick.
Torch-free: the engines score (mtkit.bulk.forced).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtkit.bulk.forced import CHUNK_PAIRS, PairScore, read_pairs, score_pairs
from mtkit.bulk.resumable import ResumableOutputs
from mtkit.bulk.shard_sets import Shard
from mtkit.bulk.shards import ShardSpec, count_pairs, read_pair_chunks
from mtkit.corpus.language_pairs import language_pairs
from mtkit.engines.contract import Translating, language_pair
from mtkit.errors import check
from mtkit.files import atomic_write, file_identity, read_lines

SCORES_SUFFIX = ".scores.tsv"  # per pair: score, H_A(y|x), H_B(x|y); "nan" three times for a pair without one


def cross_entropy(answer: PairScore) -> float | None:
    """Per-token cross-entropy of a forced score, None for a pair without one."""
    return None if answer.score is None else -answer.score / answer.tokens


def dual_score(h_forward: float, h_backward: float) -> float:
    """exp(-(|H_A - H_B| + (H_A + H_B) / 2)): disagreement and improbability both lower it."""
    return math.exp(-(abs(h_forward - h_backward) + (h_forward + h_backward) / 2))


def score_rows(forward: Translating, backward: Translating, sources: list[str], targets: list[str]) -> list[str]:
    """One TSV row per pair: the dual score and both cross-entropies (nan where a model gives none)."""
    rows = []
    for ahead, back in zip(score_pairs(forward, sources, targets), score_pairs(backward, targets, sources)):
        h_a, h_b = cross_entropy(ahead), cross_entropy(back)
        if h_a is None or h_b is None:
            rows.append("nan\tnan\tnan\n")
        else:
            rows.append(
                f"{dual_score(h_a, h_b):.9g}\t{h_a:.6f}\t{h_b:.6f}\n"
            )  # 9 digits: small ratings keep their order
    return rows


def score_corpus(
    forward: Translating,
    backward: Translating,
    source: Path,
    target: Path,
    prefix: Path,
    overwrite: bool = False,
    chunk: int = CHUNK_PAIRS,
    on_chunk: Callable[[int], None] | None = None,
) -> tuple[Path, int]:
    """Score every pair into PREFIX.scores.tsv, chunk by chunk; returns the file and the pairs resumed past."""
    scores = Path(f"{prefix}{SCORES_SUFFIX}")
    identity = scoring_identity(forward, backward, source, target, chunk)
    outputs = ResumableOutputs(Path(f"{prefix}.progress.json"), [scores], identity, overwrite)
    resumed = outputs.done
    for index, (sources, targets) in enumerate(read_pairs(source, target, chunk)):
        if index * chunk < resumed:
            continue  # written before the restart: chunks are recorded whole
        outputs.append(["".join(score_rows(forward, backward, sources, targets))], len(sources))
        if on_chunk is not None:
            on_chunk(len(sources))
    outputs.finish()
    return scores, resumed


def scoring_identity(
    forward: Translating, backward: Translating, source: Path, target: Path, chunk: int
) -> dict[str, str]:
    """What a resumed scoring (or another shard of its set) must share for the same scores."""
    return {
        "forward model": str(forward.info.get("checkpoint")),
        "backward model": str(backward.info.get("checkpoint")),
        "source": file_identity(source),
        "target": file_identity(target),
        "chunk": str(chunk),
        "engines": f"{type(forward).__name__} {type(backward).__name__}",
    }


def score_shard(
    forward: Translating,
    backward: Translating,
    source: Path,
    target: Path,
    prefix: Path,
    spec: ShardSpec,
    selection: dict[str, Any],
    overwrite: bool = False,
    chunk: int = CHUNK_PAIRS,
    on_chunk: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Score shard `spec`'s pairs into PREFIX.scores.tsv.shard-K-of-N, resumable as score_corpus; the shard that
    completes the set merges it into PREFIX.scores.tsv. `selection` (kept in the shards' records): what
    select_merged needs to write the kept pairs once merged, by this shard or by `mtkit merge-shards`."""
    identity = scoring_identity(forward, backward, source, target, chunk)
    scores = Path(f"{prefix}{SCORES_SUFFIX}")
    shard = Shard(prefix, spec, [scores], "filter-pairs", identity, count_pairs(source, target), chunk, selection)
    resumed = 0
    if overwrite or not shard.already_done():
        shard.begin()
        outputs = ResumableOutputs(shard.progress, shard.files, shard.resume_identity(), overwrite)
        resumed = outputs.done
        for sources, targets in read_pair_chunks(source, target, shard.start + resumed, shard.end, chunk):
            outputs.append(["".join(score_rows(forward, backward, sources, targets))], len(sources))
            if on_chunk is not None:
                on_chunk(len(sources))
    return {"resumed_after": resumed, **shard.finish()}


def read_scores(path: Path) -> list[float | None]:
    return [None if row.startswith("nan") else float(row.split("\t", 1)[0]) for row in read_lines(path)]


@dataclass
class Selection:
    kept: list[bool]
    cutoff: float | None  # the lowest score kept (None when nothing is kept)

    @property
    def counts(self) -> dict[str, int]:
        return {"pairs": len(self.kept), "kept": sum(self.kept), "dropped": len(self.kept) - sum(self.kept)}


def check_selection(keep: float | None, threshold: float | None) -> None:
    check((keep is None) != (threshold is None), "give one of --keep FRACTION or --threshold SCORE")
    check(keep is None or 0 < keep <= 1, f"--keep {keep}: a fraction in (0, 1]")


def select(scores: list[float | None], keep: float | None = None, threshold: float | None = None) -> Selection:
    """The best `keep` fraction (rounded down; ties go to the earlier pair) or every score >= `threshold`; pairs
    without a score are never kept."""
    check_selection(keep, threshold)
    rated = [i for i, score in enumerate(scores) if score is not None]
    if keep is not None:
        best = sorted(rated, key=lambda i: (-scores[i], i))[: int(keep * len(scores))]  # type: ignore[operator]
    else:
        best = [i for i in rated if scores[i] >= threshold]  # type: ignore[operator]
    chosen = set(best)
    cutoff = min((scores[i] for i in best), default=None)  # type: ignore[type-var]
    return Selection([i in chosen for i in range(len(scores))], cutoff)


def write_kept(source: Path, target: Path, selection: Selection, prefix: Path, langs: tuple[str, str]) -> list[Path]:
    """PREFIX.SRC_LANG and PREFIX.TGT_LANG: the kept pairs in input order, each file written atomically."""
    paths = [Path(f"{prefix}.{lang}") for lang in langs]
    with atomic_write(paths[0], "w") as src_out, atomic_write(paths[1], "w") as tgt_out:
        keep = iter(selection.kept)
        for sources, targets in read_pairs(source, target):
            for s, t in zip(sources, targets):
                if next(keep):
                    src_out.write(s + "\n")
                    tgt_out.write(t + "\n")
    return paths


def asked_direction(translator: Translating, name: str, option: str) -> tuple[str | None, str] | None:
    """(source, target) of the direction a model is asked for: its target is `option`'s (a multilingual model's
    >>xx<< code), its only code's, or its data's; its source is None where several of its pairs lead into that
    target. A model of several codes asked for none is a one-line error."""
    codes = translator.tokenizer.language_codes()
    check(
        len(codes) < 2 or translator.cfg.target_lang is not None,
        f"{name} translates into {', '.join(codes)}: give {option}",
    )
    pair = language_pair(translator)
    target = translator.cfg.target_lang or (codes[0] if codes else pair[1] if pair else None)
    if target is None:
        return None
    sources = {
        s for s, t in language_pairs(translator.tokenizer, translator.info.get("manifest", {})) if t == target.lower()
    }
    return (sources.pop() if len(sources) == 1 else None), target.lower()


def model_langs(forward: Translating, backward: Translating) -> tuple[str, str]:
    """The corpus's (source, target) codes: the forward model's target and the backward model's (each --target-lang's
    where given); each model must translate between the two where its data says what it translates."""
    ahead, back = (
        asked_direction(forward, "--forward", "--target-lang"),
        asked_direction(backward, "--backward", "--source-lang"),
    )
    source = back[1] if back else (ahead[0] if ahead else None)
    target = ahead[1] if ahead else (back[0] if back else None)
    if ahead and back:
        for name, (src, tgt), want in (("--forward", ahead, (source, target)), ("--backward", back, (target, source))):
            check(
                src in (None, want[0]) and tgt == want[1],
                f"{name} translates {src or '?'}->{tgt}; the corpus is {source}->{target} (from --forward's target "
                "and --backward's, or --target-lang and --source-lang)",
            )
    return (source or "src", target or "tgt")


def filter_corpus(
    forward: Translating,
    backward: Translating,
    source: Path,
    target: Path,
    prefix: Path,
    keep: float | None,
    threshold: float | None,
    overwrite: bool = False,
    on_chunk: Callable[[int], None] | None = None,
    chunk: int = CHUNK_PAIRS,
    shard: ShardSpec | None = None,
) -> dict:
    """Score (resumably), select and write the kept pairs; the summary `mtkit filter-pairs` prints. With `shard`,
    that shard's pairs are scored; the shard that completes the set merges the scores and selects."""
    check_selection(keep, threshold)  # before hours of scoring
    langs = model_langs(forward, backward)
    if shard is not None:
        selection = {"source": str(source.resolve()), "target": str(target.resolve())}
        selection |= {"keep": keep, "threshold": threshold, "langs": list(langs)}
        state = score_shard(forward, backward, source, target, prefix, shard, selection, overwrite, chunk, on_chunk)
        return state if state["merged"] is None else {**select_merged(prefix, selection), **state}
    scores_path, resumed = score_corpus(forward, backward, source, target, prefix, overwrite, chunk, on_chunk)
    return select_and_write(scores_path, source, target, prefix, keep, threshold, langs, resumed)


def select_merged(prefix: Path, selection: dict[str, Any]) -> dict[str, Any]:
    """The kept pairs of a merged set of scores, as its shards' records say to select them."""
    return select_and_write(
        Path(f"{prefix}{SCORES_SUFFIX}"),
        Path(selection["source"]),
        Path(selection["target"]),
        prefix,
        selection["keep"],
        selection["threshold"],
        tuple(selection["langs"]),  # type: ignore[arg-type]
    )


def select_and_write(
    scores_path: Path,
    source: Path,
    target: Path,
    prefix: Path,
    keep: float | None,
    threshold: float | None,
    langs: tuple[str, str],
    resumed: int = 0,
) -> dict[str, Any]:
    """Select from the scores and write the kept pairs; the summary."""
    scores = read_scores(scores_path)
    selection = select(scores, keep, threshold)
    kept = write_kept(source, target, selection, prefix, langs)
    return {
        **selection.counts,
        "unscored": sum(score is None for score in scores),
        "cutoff": selection.cutoff,
        "resumed_after": resumed,
        "scores": str(scores_path),
        "kept_files": [str(path) for path in kept],
    }
