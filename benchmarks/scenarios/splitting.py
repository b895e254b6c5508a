"""Sentence splitters compared: sentencex (what mtkit.text.sentences uses), the same through mtkit's
split_sentences (white space kept, line breaks, the join check), and pySBD when importable (it has no Czech). Do
not install pySBD into mtkit's .venv: its wheel (0.3.4) installs a top-level package named `benchmarks` that hides
this folder from the tests; put it aside, `pip install --target DIR pysbd==0.3.4` and run this scenario with
PYTHONPATH=DIR. Accuracy is the share of cases split exactly right, sentences compared stripped:
  - the Golden Rules cases (benchmarks/data/golden_rules.json, en and de);
  - Multi30k paragraphs: test_2016_flickr's first 1,000 lines (180 with --small, N with --lines N) of en, de, fr
    and cs, 3 and 5 to a paragraph, joined by one space (the last paragraph may be shorter), all of them and only
    those whose sentences all end with . ! or ? (a sentence without final punctuation has no end any splitter can
    see).
Speed: paragraphs/s and sentences/s of each splitter over each language's paragraphs (of 3 and of 5 together), best
of max(3, --rounds) repeats (each of as many passes as take 0.2 s), in this process, one thread, after a first
call per language.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata

from harness import ROOT, write_results

from scenarios.langid import LANGS, read_lines
from scenarios.texts import append_notes, ends_sentence, group, joined

GOLDEN_RULES = ROOT / "benchmarks" / "data" / "golden_rules.json"
SIZES = (3, 5)
MIN_REPEAT_S = 0.2
Split = Callable[[str], list[str]]  # a text -> its sentences, stripped, none empty
Splitter = Callable[[str], Split | None]  # a language -> its splitter, None where it has none


def sentencex_splitter(lang: str) -> Split:
    from sentencex import segment

    return lambda text: [s.strip() for s in segment(lang, text) if s.strip()]


def mtkit_splitter(lang: str) -> Split:
    from mtkit.text.sentences import split_sentences

    return lambda text: split_sentences(text, lang).sources


def pysbd_splitter(lang: str) -> Split | None:
    import pysbd
    from pysbd.languages import LANGUAGE_CODES

    if lang not in LANGUAGE_CODES:
        return None
    segmenter = pysbd.Segmenter(language=lang, clean=False)
    return lambda text: [s.strip() for s in segmenter.segment(text) if s.strip()]


# name -> (package, splitter)
SPLITTERS: dict[str, tuple[str, Splitter]] = {
    "sentencex": ("sentencex", sentencex_splitter),
    "mtkit split_sentences": ("sentencex", mtkit_splitter),
    "pySBD": ("pysbd", pysbd_splitter),
}


def accuracy(split: Split, cases: Sequence[tuple[str, list[str]]]) -> float:
    """Percent of (text, sentences) cases split into exactly those sentences (stripped)."""
    right = sum(split(text) == [s.strip() for s in sentences if s.strip()] for text, sentences in cases)
    return round(100 * right / len(cases), 1) if cases else float("nan")


def best_seconds(split: Split, texts: Sequence[str], repeats: int) -> float:
    """Seconds of one pass over `texts`, best of `repeats`; a repeat runs as many passes as take MIN_REPEAT_S
    (a fast splitter's single pass is too short for the clock)."""
    split(texts[0])  # a first call may compile or load
    began = time.perf_counter()
    for text in texts:
        split(text)
    passes = max(1, math.ceil(MIN_REPEAT_S / max(time.perf_counter() - began, 1e-9)))
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        for _ in range(passes):
            for text in texts:
                split(text)
        times.append((time.perf_counter() - began) / passes)
    return min(times)


def paragraph_cases(lines: Sequence[str], size: int) -> tuple[list[tuple[str, list[str]]], list[tuple[str, list[str]]]]:
    """All paragraphs of `size` lines as (text, sentences), and those whose sentences all end with . ! or ?."""
    groups = group(lines, size)
    cases = list(zip(joined(groups), groups))
    return cases, [case for case in cases if all(ends_sentence(s) for s in case[1])]


def row(name: str, lang: str, split: Split, golden: dict, lines: list[str], repeats: int) -> tuple[dict, dict]:
    """One splitter on one language: the table's row and the case counts."""
    figures: dict = {"Golden Rules %": accuracy(split, golden[lang]) if lang in golden else ""}
    counts = {"golden_rules": len(golden.get(lang, []))}
    texts: list[str] = []
    for size in SIZES:
        cases, ending = paragraph_cases(lines, size)
        figures[f"of {size}: all %"] = accuracy(split, cases)
        figures[f"of {size}: . ! ? %"] = accuracy(split, ending)
        counts[f"of_{size}"], counts[f"of_{size}_ending"] = len(cases), len(ending)
        texts += [text for text, _ in cases]
    seconds = best_seconds(split, texts, repeats)
    figures["paragraphs/s"] = round(len(texts) / seconds, 1)
    figures["sentences/s"] = round(len(lines) * len(SIZES) / seconds, 1)
    return {"splitter": name, "language": lang, **figures}, counts


def run(args: argparse.Namespace) -> None:
    golden_file = json.loads(GOLDEN_RULES.read_text(encoding="utf-8"))
    golden = {
        lang: [(case["text"], case["sentences"]) for case in golden_file[lang]]
        for lang in ("en", "de")
        if lang in golden_file
    }
    count, repeats = args.lines or (180 if args.small else 1000), max(3, args.rounds)
    lines = {lang: [line.strip() for line in read_lines(lang, count)] for lang in LANGS}
    rows, counts, notes = [], {}, []
    for name, (package, splitter) in SPLITTERS.items():
        try:
            label = f"{name} {metadata.version(package)}"
        except metadata.PackageNotFoundError:
            notes.append(f"{name} left out: {package} is not installed")
            print(notes[-1], file=sys.stderr)
            continue
        for lang in LANGS:
            split = splitter(lang)
            if split is None:
                notes.append(f"{name} has no {lang}: no row")
                continue
            print(f"{label}: {lang}", file=sys.stderr, flush=True)
            found, counts[lang] = row(label, lang, split, golden, lines[lang], repeats)
            rows.append(found)
    result = write_results("splitting", {"cases": counts, "lines_per_language": count, "repeats": repeats}, rows)
    sizes = "; ".join(
        f"{lang} {c['of_3']} of 3 ({c['of_3_ending']} ending . ! ?), {c['of_5']} of 5 ({c['of_5_ending']})"
        for lang, c in counts.items()
    )
    notes += [
        f"Golden Rules: {len(golden.get('en', []))} en and {len(golden.get('de', []))} de cases; pySBD was written "
        "to pass them, so they flatter it. Multi30k paragraphs of test_2016_flickr's first "
        f"{count} lines: {sizes}.",
        "A sentence without final punctuation (. ! ?) gives a splitter no end to find: a paragraph holding one is "
        "split right only by chance, hence the columns of the paragraphs whose sentences all end so.",
        f"Speed: over each language's paragraphs of 3 and of 5 together, best of {repeats}, one thread, in the "
        "benchmark's own process (a first call per language not counted).",
    ]
    append_notes(result, notes)
