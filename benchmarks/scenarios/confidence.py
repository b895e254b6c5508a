"""How well a translation's confidence finds its worst translations: test_2016_flickr's first 1,000 lines (200 with
--small, N with --lines N) en->de by a trained run (--demo-run), one a line.

  `mtkit translate RUN --scores`: each line's SCORE (log-prob under the search's length penalty) and CONFIDENCE
  (mean log-prob per token, eos counted);
  `mtkit serve RUN`, mtkit's POST /translate (sentences split, the default): each sentence's confidence and
  word_confidence (log-prob per word of the translation); a line of several sentences gets their log-prob over
  their tokens (words), each sentence's log-prob being word_confidence x its words (at least 1) and its tokens
  that over confidence.

Each signal is judged against sentence BLEU (sacrebleu.sentence_bleu, its defaults) of the translation it scores:
the lowest-BLEU tenth of the lines (ties broken by line order) against the rest, ROC AUC of the negated signal as a
detector of that tenth (Mann-Whitney, ties counted half) and the signal's mean in each group.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from harness import WORK, write_lines, write_results

from scenarios.langid import read_lines
from scenarios.texts import append_notes, bleu, demo_run, post_all, served, translate

BOTTOM_SHARE = 0.1


def auc(scores: Sequence[float], positive: Sequence[bool]) -> float:
    """P(a positive scores above a negative), ties counted half (Mann-Whitney U over both counts)."""
    order = sorted(range(len(scores)), key=scores.__getitem__)
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):  # tied scores share the mean of their ranks (1-based)
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    n_pos = sum(positive)
    n_neg = len(scores) - n_pos
    if not n_pos or not n_neg:
        return float("nan")
    rank_sum = sum(rank for rank, p in zip(ranks, positive) if p)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def bottom_tenth(sentence_bleu: Sequence[float]) -> list[bool]:
    """The lowest-BLEU tenth of the lines (at least one), ties broken by line order."""
    order = sorted(range(len(sentence_bleu)), key=lambda i: (sentence_bleu[i], i))
    chosen = set(order[: max(1, int(len(order) * BOTTOM_SHARE))])
    return [i in chosen for i in range(len(sentence_bleu))]


def sentence_bleus(outputs: Sequence[str], refs: Sequence[str]) -> list[float]:
    import sacrebleu

    return [sacrebleu.sentence_bleu(out, [ref]).score for out, ref in zip(outputs, refs)]


def judged(
    route: str, signal: str, values: Sequence[float | None], outputs: Sequence[str], refs: Sequence[str]
) -> dict:
    """One signal's row: lines with a value only, their bottom tenth by sentence BLEU, AUC and the group means."""
    kept = [i for i, value in enumerate(values) if value is not None]
    scores = sentence_bleus([outputs[i] for i in kept], [refs[i] for i in kept])
    bottom = bottom_tenth(scores)
    signal_values = [values[i] for i in kept]
    low = [v for v, b in zip(signal_values, bottom) if b]
    rest = [v for v, b in zip(signal_values, bottom) if not b]
    return {
        "route": route,
        "signal": signal,
        "lines": len(kept),
        "BLEU": bleu(outputs, refs)[0],
        "bottom tenth: sentence BLEU <=": round(max(s for s, b in zip(scores, bottom) if b), 2),
        "AUC": round(auc([-v for v in signal_values], bottom), 3),
        "mean, bottom tenth": round(sum(low) / len(low), 4),
        "mean, the rest": round(sum(rest) / len(rest), 4),
    }


def cli_signals(run: Path, source: Path, out: Path) -> tuple[list[str], list[float], list[float]]:
    """`mtkit translate --scores`: texts, SCORE and CONFIDENCE per line."""
    lines, _, _ = translate(run, source, out, "--scores")
    fields = [line.split("\t", 2) for line in lines]
    return [f[2] for f in fields], [float(f[0]) for f in fields], [float(f[1]) for f in fields]


def line_signals(sentences: list[dict]) -> tuple[float | None, float | None]:
    """A line's per-token and per-word confidence from its sentences' (None: no sentence the model scored)."""
    scored = [s for s in sentences if s["word_confidence"] is not None]
    if not scored:
        return None, None
    words = [max(len(s["translation"].split()), 1) for s in scored]
    logprobs = [s["word_confidence"] * w for s, w in zip(scored, words)]
    tokens = [lp / s["confidence"] if s["confidence"] else 1.0 for lp, s in zip(logprobs, scored)]
    return sum(logprobs) / sum(tokens), sum(logprobs) / sum(words)


def run(args: argparse.Namespace) -> None:
    run_dir = demo_run(args, "confidence")
    count = args.lines or (200 if args.small else 1000)
    out = WORK / "confidence" / ("small" if args.small else "full")
    source = write_lines(out / "test.en", [line.strip() for line in read_lines("en", count)])
    refs = [line.strip() for line in read_lines("de", count)]
    texts, scores, confidences = cli_signals(run_dir, source, out / "scores.tsv")
    with served(run_dir, "confidence") as port:
        answers = post_all(port, source.read_text(encoding="utf-8").splitlines(), {}, "text")
    served_texts = [t for a in answers for t in a["translations"]]
    (out / "served.jsonl").write_text("".join(json.dumps(s) + "\n" for a in answers for s in a["sentences"]))
    per_line = [line_signals(sentences) for a in answers for sentences in a["sentences"]]
    several = sum(len(sentences) > 1 for a in answers for sentences in a["sentences"])
    guard = Counter()
    for answer in answers:
        guard.update(answer["guard"])
    rows = [
        judged("translate --scores", "SCORE (length penalty)", scores, texts, refs),
        judged("translate --scores", "CONFIDENCE (per token)", confidences, texts, refs),
        judged("serve sentences", "confidence (per token)", [t for t, _ in per_line], served_texts, refs),
        judged("serve sentences", "word_confidence (per word)", [w for _, w in per_line], served_texts, refs),
    ]
    alike = sum(a == b for a, b in zip(texts, served_texts))
    report = {
        "run": str(run_dir),
        "lines": count,
        "served_lines_as_cli": alike,
        "lines_of_several_sentences": several,
        "served_guard": dict(guard),
    }
    result = write_results("confidence", report, rows)
    append_notes(
        result,
        [
            f"test_2016_flickr's first {count} lines, en->de, by {run_dir.parent.name}/{run_dir.name}, one a line; "
            f"the server split {several} of them into several sentences; its guard's counts (sentences retried, "
            f"kept as written, tamed): {guard['retried']}, {guard['kept']}, {guard['tamed']} (`mtkit translate` "
            f"without --split-sentences has no guard); {alike}/{count} served lines are the CLI's.",
            "AUC: of the negated signal as a detector of the lowest-BLEU tenth (0.5: chance, 1: every bottom line "
            "below every other); the means are of the signal itself (log-probs: closer to 0 is surer).",
        ],
    )
