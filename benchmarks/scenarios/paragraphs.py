"""Paragraphs translated en->de by a trained run (--demo-run): test_2016_flickr's first 1,000 lines (180 with
--small, N with --lines N), 3 and 5 to a paragraph joined by one space (the last may be shorter), each route scored
with sacreBLEU against the German references joined the same way:
  lines, joined      `mtkit translate` of the lines one a line, each paragraph's joined (the baseline)
  translate split    `mtkit translate --split-sentences`, a paragraph a line
  translate whole    `mtkit translate`, a paragraph a line: each paragraph one segment (the behaviour before)
  serve mtkit        mtkit's POST /translate {"text": [...]} (sentences split by default)
  serve mtkit whole  the same with "split_sentences": false
  serve libre text   LibreTranslate's POST /translate, format text
  serve libre html   format html, each paragraph as <p>...</p>, the tags stripped from the output
  html inline tags   format html, one or two words of one sentence of each paragraph in <b> or <a href>
                     (random.Random(SEED)): the share of each tag's start and end tags that come back
Besides BLEU: the length ratio; the paragraphs whose output has fewer (more) sentences than their source
(mtkit.text.sentences.split_sentences on the German; the references row shows that splitter's own misses); the
guard's counts (the API's "guard", the text sentences' "guard", the CLI's log line); lines truncated.
The cost of splitting: the same server, the lines one a line, split on and off alternating --rounds times, requests of
16 lines, 4 in flight: sentences/s and the answers both give alike. One server (`mtkit serve RUN`, its defaults)
answers every serve route; every route uses the run's own search settings.
"""

from __future__ import annotations

import argparse
import html
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from harness import WORK, alternate, medians, post_json, write_lines, write_results

from scenarios.langid import read_lines
from scenarios.texts import (
    append_notes,
    bleu,
    demo_run,
    group,
    guard_from_log,
    joined,
    post_all,
    served,
    translate,
)

SIZES = (3, 5)
SEED = 1
TAGS = {"b": ("<b>", "</b>"), "a": ('<a href="https://example.com">', "</a>")}
GUARD_LABELS = ("retried", "kept", "tamed")
LIBRE = {"source": "en", "target": "de"}
_TAG = re.compile(r"<[^>]*>")
Route = dict[str, object]  # outputs and figures of one route: "outputs" (paragraphs) and the table's columns


def strip_tags(document: str) -> str:
    return html.unescape(_TAG.sub("", document)).strip()


def sentence_count(text: str, lang: str) -> int:
    from mtkit.text.sentences import split_sentences

    return len(split_sentences(text, lang).sources)


def sentence_changes(outputs: Sequence[str], groups: Sequence[Sequence[str]], lang: str = "de") -> tuple[str, str]:
    """The paragraphs whose output splits into fewer, and into more, German sentences than the source has, each
    as "count/paragraphs"."""
    counts = [sentence_count(text, lang) for text in outputs]
    fewer = sum(n < len(g) for n, g in zip(counts, groups))
    more = sum(n > len(g) for n, g in zip(counts, groups))
    return f"{fewer}/{len(groups)}", f"{more}/{len(groups)}"


def guard_text(counts: Counter) -> str:
    return f"{counts['sentences']} sent., " + ", ".join(f"{counts[label]} {label}" for label in GUARD_LABELS)


def with_inline_tag(sentences: Sequence[str], rng: random.Random) -> tuple[str, str | None]:
    """A paragraph as one HTML <p> with one or two words (letters only) of one sentence in a <b> or <a> tag
    (None: no sentence had such a word)."""
    escaped = [html.escape(s, quote=False).split(" ") for s in sentences]
    tag = rng.choice(sorted(TAGS))
    spans: list[tuple[int, int, int]] = []  # (sentence, first word, words)
    for width in (rng.choice((1, 2)), 1):  # two words where the paragraph has two in a row, else one
        spans = spans or [
            (k, i, width)
            for k, words in enumerate(escaped)
            for i in range(len(words) - width + 1)
            if all(word.isalpha() for word in words[i : i + width])
        ]
    if not spans:
        return "<p>" + " ".join(" ".join(words) for words in escaped) + "</p>", None
    k, i, w = rng.choice(spans)
    start, end = TAGS[tag]
    escaped[k][i] = start + escaped[k][i]
    escaped[k][i + w - 1] += end
    return "<p>" + " ".join(" ".join(words) for words in escaped) + "</p>", tag


def tags_back(documents: Sequence[str], outputs: Sequence[str]) -> dict[str, str]:
    """For each tag: its start and end tags in the outputs / in the inputs."""
    found = {}
    for tag, (start, end) in TAGS.items():
        for what, mark in (("start", start), ("end", end)):
            sent = sum(d.count(mark) for d in documents)
            found[f"<{tag}> {what}"] = f"{sum(o.count(mark) for o in outputs)}/{sent}"
    return found


def cli_routes(run: Path, groups: list[list[str]], lines: Route, folder: Path) -> dict[str, Route]:
    """The `mtkit translate` routes of one paragraph size; `lines`: the lines translated one a line."""
    paragraphs = write_lines(folder / "paragraphs.en", joined(groups))
    parts = iter(lines["outputs"])
    joined_lines = [" ".join(next(parts) for _ in g) for g in groups]
    routes: dict[str, Route] = {"lines, joined": {"outputs": joined_lines, "seconds": lines["seconds"]}}
    outputs, seconds, stderr = translate(run, paragraphs, folder / "split.de", "--split-sentences")
    routes["translate split"] = {
        "outputs": outputs,
        "seconds": seconds,
        "guard": guard_text(Counter(guard_from_log(stderr))),
    }
    outputs, seconds, stderr = translate(run, paragraphs, folder / "whole.de")
    routes["translate whole"] = {"outputs": outputs, "seconds": seconds, "truncated": stderr.count("truncated to")}
    return routes


def timed(port: int, texts: Sequence[str], body: dict, field: str) -> tuple[list[dict], float]:
    """post_all's answers and its wall seconds."""
    began = time.monotonic()
    answers = post_all(port, texts, body, field)
    return answers, round(time.monotonic() - began, 2)


def serve_routes(port: int, groups: list[list[str]]) -> dict[str, Route]:
    """The served routes of one paragraph size (html inline tags apart)."""
    texts = joined(groups)
    routes: dict[str, Route] = {}
    for name, extra in (("serve mtkit", {}), ("serve mtkit whole", {"split_sentences": False})):
        answers, seconds = timed(port, texts, extra, "text")
        guard = Counter()
        for answer in answers:
            guard.update(answer.get("guard", {}))
        routes[name] = {
            "outputs": [t for a in answers for t in a["translations"]],
            "seconds": seconds,
            "guard": guard_text(guard) if "guard" in answers[0] else "",
            "truncated": sum("truncated" in w for a in answers for w in a.get("warnings", [])),
        }
    answers, seconds = timed(port, texts, {**LIBRE, "format": "text"}, "q")
    sentences = [s for a in answers for text in a.get("sentences", []) for s in text]
    guard = Counter({"sentences": len(sentences)}) + Counter(s["guard"] for s in sentences if s["guard"])
    routes["serve libre text"] = {
        "outputs": [t for a in answers for t in a["translatedText"]],
        "seconds": seconds,
        "guard": guard_text(guard) if sentences else "no sentences in the answer",
    }
    documents = ["<p>" + html.escape(text, quote=False) + "</p>" for text in texts]
    answers, seconds = timed(port, documents, {**LIBRE, "format": "html"}, "q")
    routes["serve libre html"] = {
        "outputs": [strip_tags(t) for a in answers for t in a["translatedText"]],
        "seconds": seconds,
    }
    return routes


def inline_route(port: int, groups: list[list[str]], plain_bleu: float, refs: list[str]) -> Route:
    """HTML with an inline tag in each paragraph: tags back, BLEU with tags stripped against without tags."""
    rng = random.Random(SEED)
    made = [with_inline_tag(g, rng) for g in groups]
    documents = [document for document, _ in made]
    answers, seconds = timed(port, documents, {**LIBRE, "format": "html"}, "q")
    raw = [t for a in answers for t in a["translatedText"]]
    outputs = [strip_tags(t) for t in raw]
    return {
        "outputs": outputs,
        "seconds": seconds,
        "tags back": ", ".join(f"{k} {v}" for k, v in tags_back(documents, raw).items()),
        "BLEU without tags": plain_bleu,
        "untagged paragraphs": sum(tag is None for _, tag in made),
        "samples": list(zip(documents[:3], raw[:3])),
    }


def splitting_cost(port: int, lines: list[str], rounds: int) -> tuple[list[dict], dict]:
    """sentences/s of the lines one a line with splitting on and off, alternating; answers alike."""
    outputs: dict[str, list[str]] = {}

    def program(split: bool) -> Callable[[int], dict[str, float]]:
        def once(round_: int) -> dict[str, float]:
            answers, seconds = timed(port, lines, {"split_sentences": split}, "text")
            outputs[f"split {'on' if split else 'off'}"] = [t for a in answers for t in a["translations"]]
            return {"sent_per_s": round(len(lines) / seconds, 1), "seconds": seconds}

        return once

    for split in (True, False):  # a first request each, untimed
        post_json(port, {"text": lines[:16], "split_sentences": split})
    results = alternate({"split on": program(True), "split off": program(False)}, rounds)
    alike = sum(a == b for a, b in zip(outputs["split on"], outputs["split off"]))
    rows = [
        {
            "paragraph": 1,
            "route": f"serve mtkit, lines one a line, {name}",
            "sent/s": medians(r)["sent_per_s"],
            "answers as split off": f"{alike}/{len(lines)}",
        }
        for name, r in results.items()
    ]
    return rows, results


def run(args: argparse.Namespace) -> None:
    run_dir = demo_run(args, "paragraphs")
    count = args.lines or (180 if args.small else 1000)
    lines = [line.strip() for line in read_lines("en", count)]
    refs = [line.strip() for line in read_lines("de", count)]
    out = WORK / "paragraphs" / ("small" if args.small else "full")
    print("one a line: mtkit translate", file=sys.stderr, flush=True)
    outputs, seconds, _ = translate(run_dir, write_lines(out / "lines.en", lines), out / "lines.de")
    one_a_line: Route = {"outputs": outputs, "seconds": seconds}
    rows: list[dict] = []
    details: dict = {}
    routes: dict[int, dict[str, Route]] = {}
    for size in SIZES:
        print(f"paragraphs of {size}: mtkit translate", file=sys.stderr, flush=True)
        routes[size] = cli_routes(run_dir, group(lines, size), one_a_line, out / f"of-{size}")
    with served(run_dir, "paragraphs") as port:
        for size in SIZES:
            print(f"paragraphs of {size}: mtkit serve", file=sys.stderr, flush=True)
            routes[size] |= serve_routes(port, group(lines, size))
            ref_paragraphs = joined(group(refs, size))
            plain = bleu(routes[size]["serve libre html"]["outputs"], ref_paragraphs)[0]
            routes[size]["html inline tags"] = inline_route(port, group(lines, size), plain, ref_paragraphs)
        print("the cost of splitting", file=sys.stderr, flush=True)
        cost_rows, details["splitting_cost"] = splitting_cost(port, lines, args.rounds)
    for size in SIZES:
        groups, ref_paragraphs = group(lines, size), joined(group(refs, size))
        for name, texts, lang in (("sources", joined(groups), "en"), ("references", ref_paragraphs, "de")):
            fewer, more = sentence_changes(texts, groups, lang)
            rows.append(
                {
                    "paragraph": size,
                    "route": name,
                    "BLEU": "",
                    "len ratio": "",
                    "fewer sentences": fewer,
                    "more sentences": more,
                }
            )
        for name, route in routes[size].items():
            score, ratio = bleu(route["outputs"], ref_paragraphs)
            fewer, more = sentence_changes(route["outputs"], groups)
            figures = {k: v for k, v in route.items() if k not in ("outputs", "samples", "untagged paragraphs")}
            rows.append(
                {
                    "paragraph": size,
                    "route": name,
                    "BLEU": score,
                    "len ratio": ratio,
                    "fewer sentences": fewer,
                    "more sentences": more,
                    **figures,
                }
            )
        details[f"of_{size}"] = {
            "paragraphs": len(groups),
            "untagged_paragraphs": routes[size]["html inline tags"]["untagged paragraphs"],
            "html_inline_samples": routes[size]["html inline tags"]["samples"],
            "first_outputs": {name: route["outputs"][:3] for name, route in routes[size].items()},
        }
    rows += cost_rows
    result = write_results("paragraphs", {"run": str(run_dir), "lines": count, **details}, rows)
    append_notes(
        result,
        [
            f"test_2016_flickr's first {count} lines, en->de, by {run_dir.parent.name}/{run_dir.name}; BLEU against "
            "the references joined as the paragraphs are.",
            "fewer/more sentences: paragraphs whose text splits into fewer/more sentences than the paragraph was made "
            "of; the sources row is the English splitter on the sources (what splitting translates), the references "
            "row the German splitter on the references (the floor of the columns).",
            "seconds: the CLI's own translation time (model load excluded), the serve routes' request wall (4 "
            "requests of 16 texts in flight); guard: sentences, then what the guard did; truncated: over-long lines "
            "(the CLI's warnings, the API's).",
            "html inline tags: the BLEU column is of the output with tags stripped, BLEU without tags the same "
            "paragraphs as plain <p> (the serve libre html row).",
        ],
    )
