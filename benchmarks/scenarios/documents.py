"""Documents translated en->de by a trained run (--demo-run) with `mtkit translate-file`, against the same text as
lines through `mtkit translate`, each with the run's own search settings.
  subtitles   test_2016_flickr's first 1,000 English sentences (200 with --small, N with --lines N) as an SRT file,
              each sentence cut at the word boundary nearest its middle (by characters) into two consecutive cues.
              The sentences go in pairs: the first's first half is a cue, its second half and the next sentence's
              first half share the middle cue, the second's second half is the third cue (3 cues a pair; an odd
              last sentence gets two cues of its own). A cue over 42 characters is shown on two lines cut the
              same way. Translated (a) sentence-aware: `mtkit translate-file RUN subs.srt`, and (b) cue by cue:
              each cue's text as one line through `mtkit translate RUN`. Scored per source sentence: the text of
              the cues it spans joined by a space (for (a) read from the output SRT), sacreBLEU against the German
              references, and the length ratio; a shared cue counts in both its sentences, so "BLEU pairs" also
              scores each pair's three cues once against its two references joined.
  throughput  a .docx (python-docx) of 50 pages (5 with --small): a heading ("Page N") and 12 paragraphs of 3
              sentences (test_2016_flickr's English, then val's) a page, one word near the middle of every fifth
              paragraph bold, a page break after each page but the last. `mtkit translate-file RUN doc.docx --json`
              (its "seconds", and the command's wall) against the headings' and paragraphs' text one a line through
              `mtkit translate RUN --split-sentences` (its "translated N lines in S s", and the wall), alternating
              --rounds times, medians: pages/s, MB/s (the .docx's size, 10^6 bytes) and source sentences/s of each,
              and their ratio.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from harness import WORK, alternate, checked, measure, medians, read_lines, write_lines, write_results

from scenarios.texts import append_notes, bleu, demo_run, guard_from_log, translate
from scenarios.workload import MULTI30K, mtkit

WIDTH = 42  # characters a subtitle line holds; the cue text is put on two lines beyond it
CUE_S, GAP_S = 2.0, 0.5  # each cue's duration and the pause after it
PAGE_PARAGRAPHS, PARAGRAPH_SENTENCES, BOLD_EVERY = 12, 3, 5
_TIMING = re.compile(r"^\d+:\d\d:\d\d,\d{3} --> \d+:\d\d:\d\d,\d{3}$")


def read_sentences(split: str, lang: str, count: int | None = None) -> list[str]:
    return [line.strip() for line in read_lines(MULTI30K / f"{split}.{lang}.gz", count)]


def halves(text: str) -> tuple[str, str]:
    """`text` cut at the space nearest its middle (by characters; the earlier of two as near)."""
    spaces = [i for i, c in enumerate(text) if c == " "]
    if not spaces:
        raise SystemExit(f"a sentence of one word cannot be spread over two cues: {text!r}")
    cut = min(spaces, key=lambda i: (abs(2 * i - len(text)), i))
    return text[:cut], text[cut + 1 :]


def cue_plan(sentences: Sequence[str]) -> tuple[list[str], list[tuple[int, int]]]:
    """The cues' texts and, for each sentence, the indices of its two cues (see the module docstring)."""
    cues: list[str] = []
    spans: list[tuple[int, int]] = []
    for k in range(0, len(sentences), 2):
        first = halves(sentences[k])
        if k + 1 == len(sentences):
            spans.append((len(cues), len(cues) + 1))
            cues += first
            continue
        second = halves(sentences[k + 1])
        spans += [(len(cues), len(cues) + 1), (len(cues) + 1, len(cues) + 2)]
        cues += [first[0], first[1] + " " + second[0], second[1]]
    return cues, spans


def stamp(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def srt(cues: Sequence[str]) -> str:
    """Numbered cues CUE_S long GAP_S apart, a text over WIDTH characters on two lines."""
    blocks = []
    for i, text in enumerate(cues):
        begin = i * (CUE_S + GAP_S)
        shown = "\n".join(halves(text)) if len(text) > WIDTH else text
        blocks.append(f"{i + 1}\n{stamp(begin)} --> {stamp(begin + CUE_S)}\n{shown}\n")
    return "\n".join(blocks)


def read_srt(text: str) -> list[tuple[str, list[str]]]:
    """Each cue's timing line and its text lines."""
    cues = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.splitlines()
        if len(lines) < 2 or not _TIMING.match(lines[1]):
            raise SystemExit(f"the translated SRT has a block without its timing line: {block[:200]!r}")
        cues.append((lines[1], [line.strip() for line in lines[2:]]))
    return cues


def translate_file(run: Path, source: Path, out: Path) -> tuple[dict, float]:
    """`mtkit translate-file RUN SOURCE --out OUT --json`: its summary and the command's wall seconds."""
    log = WORK / "logs" / f"documents-{out.stem}"
    m = checked(measure(mtkit("translate-file", str(run), str(source), "--out", str(out), "--json"), log), log.name)
    return json.loads(m.stdout.strip().splitlines()[-1]), m.wall_s


def summary_figures(summary: dict) -> dict:
    """The summary without the file paths (they name this machine's folders)."""
    documents = [{k: v for k, v in d.items() if k not in ("input", "output")} for d in summary["documents"]]
    return {**summary, "documents": documents}


def per_sentence(cue_texts: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[str]:
    return [" ".join(cue_texts[i] for i in span) for span in spans]


def per_pair(cue_texts: Sequence[str], spans: Sequence[tuple[int, int]]) -> list[str]:
    """Each pair of sentences' cues, every cue once, joined by a space."""
    return [
        " ".join(cue_texts[spans[k][0] : spans[min(k + 1, len(spans) - 1)][1] + 1]) for k in range(0, len(spans), 2)
    ]


def subtitles(run: Path, count: int, folder: Path) -> tuple[list[dict], dict]:
    sentences, refs = read_sentences("test_2016_flickr", "en", count), read_sentences("test_2016_flickr", "de", count)
    cues, spans = cue_plan(sentences)
    source = folder / "subs.srt"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(srt(cues), encoding="utf-8")
    print(f"subtitles: {len(sentences)} sentences in {len(cues)} cues, sentence-aware", file=sys.stderr, flush=True)
    summary, wall = translate_file(run, source, folder / "subs.de.srt")
    translated = read_srt((folder / "subs.de.srt").read_text(encoding="utf-8"))
    if len(translated) != len(cues):
        raise SystemExit(f"mtkit translate-file gave {len(translated)} cues for {len(cues)}")
    timings = [timing for timing, _ in read_srt(source.read_text(encoding="utf-8"))]
    aware = [" ".join(lines) for _, lines in translated]
    print("subtitles: cue by cue", file=sys.stderr, flush=True)
    by_cue, seconds, _ = translate(run, write_lines(folder / "cues.en", cues), folder / "cues.de")
    ref_pairs = [" ".join(refs[k : k + 2]) for k in range(0, len(refs), 2)]
    rows = []
    for route, texts, own_s, wall_s in (
        ("(a) translate-file, sentence-aware", aware, summary["seconds"], wall),
        ("(b) translate, cue by cue", by_cue, seconds, None),
    ):
        score, ratio = bleu(per_sentence(texts, spans), refs)
        rows.append(
            {
                "part": "subtitles",
                "route": route,
                "BLEU": score,
                "len ratio": ratio,
                "BLEU pairs": bleu(per_pair(texts, spans), ref_pairs)[0],
                "s": round(own_s, 2),
                "wall s": wall_s if wall_s is not None else "",
            }
        )
    rows.append(
        {
            "part": "subtitles",
            "route": "(a) - (b)",
            "BLEU": round(rows[0]["BLEU"] - rows[1]["BLEU"], 2),
            "BLEU pairs": round(rows[0]["BLEU pairs"] - rows[1]["BLEU pairs"], 2),
        }
    )
    checks = {
        "sentences": len(sentences),
        "cues": len(cues),
        "translate_file": summary_figures(summary),
        "timings_kept": sum(a == b for a, (b, _) in zip(timings, translated)),
        "empty_cues": sum(not text for text in aware),
        "lines_over_width": sum(len(line) > WIDTH for _, lines in translated for line in lines),
        "samples": [
            {"source": sentences[k], "aware": per_sentence(aware, spans)[k], "by_cue": per_sentence(by_cue, spans)[k]}
            for k in range(3)
        ],
    }
    return rows, checks


def bold_word(words: Sequence[str]) -> int:
    """The index of the word of letters nearest the middle (the middle word when none is of letters only)."""
    letters = [i for i, word in enumerate(words) if word.isalpha()] or [len(words) // 2]
    return min(letters, key=lambda i: (abs(2 * i + 1 - len(words)), i))


def make_docx(path: Path, pages: int) -> list[str]:
    """The .docx of the module docstring; its headings' and paragraphs' texts in order, one a line."""
    import docx

    count = pages * PAGE_PARAGRAPHS
    sentences = read_sentences("test_2016_flickr", "en") + read_sentences("val", "en")
    if len(sentences) < count * PARAGRAPH_SENTENCES:
        raise SystemExit(f"{pages} pages need {count * PARAGRAPH_SENTENCES} sentences; there are {len(sentences)}")
    document, lines = docx.Document(), []
    for n in range(count):
        if n % PAGE_PARAGRAPHS == 0:
            if n:
                document.add_page_break()
            lines.append(f"Page {n // PAGE_PARAGRAPHS + 1}")
            document.add_heading(lines[-1], level=1)
        text = " ".join(sentences[n * PARAGRAPH_SENTENCES : (n + 1) * PARAGRAPH_SENTENCES])
        lines.append(text)
        paragraph = document.add_paragraph()
        if n % BOLD_EVERY == BOLD_EVERY - 1:  # the 5th, 10th, ... paragraph
            words = text.split(" ")
            b = bold_word(words)
            paragraph.add_run(" ".join(words[:b]) + " ")
            paragraph.add_run(words[b]).bold = True
            paragraph.add_run(" " + " ".join(words[b + 1 :]))
        else:
            paragraph.add_run(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    document.save(str(path))
    return lines


def read_docx(path: Path) -> dict:
    """What came back: the texts of the paragraphs with text, the bold runs with text, the page breaks."""
    import docx

    document = docx.Document(str(path))
    paragraphs = document.paragraphs
    return {
        "texts": [p.text for p in paragraphs if p.text.strip()],
        "headings": sum(p.style.name.startswith("Heading") and bool(p.text.strip()) for p in paragraphs),
        "bold_runs": sum(bool(r.bold) and bool(r.text.strip()) for p in paragraphs for r in p.runs),
        "page_breaks": len(document.element.body.xpath('.//w:br[@w:type="page"]')),
    }


def throughput(run: Path, pages: int, rounds: int, folder: Path) -> tuple[list[dict], dict]:
    source = folder / "doc.docx"
    lines = make_docx(source, pages)
    text = write_lines(folder / "doc.en", lines)
    size_mb = source.stat().st_size / 1e6
    sentences = pages * (PAGE_PARAGRAPHS * PARAGRAPH_SENTENCES + 1)  # the headings are sentences too
    outputs: dict[str, list[str]] = {}
    summaries: list[dict] = []
    guards: list[dict[str, int]] = []

    def as_document(round_: int) -> dict[str, float]:
        summary, wall = translate_file(run, source, folder / "doc.de.docx")
        summaries.append(summary_figures(summary))
        return {"seconds": summary["seconds"], "wall_s": wall}

    def as_lines(round_: int) -> dict[str, float]:
        log = WORK / "logs" / "documents-lines"
        m = checked(
            measure(
                mtkit("translate", str(run), "-i", str(text), "-o", str(folder / "doc.de"), "--split-sentences"), log
            ),
            "mtkit translate --split-sentences",
        )
        found = re.search(r"translated \d+ lines in ([\d.]+) ?s", m.stderr)
        outputs["lines"] = (folder / "doc.de").read_text(encoding="utf-8").splitlines()
        guards.append(guard_from_log(m.stderr))
        return {"seconds": float(found.group(1)) if found else m.wall_s, "wall_s": m.wall_s}

    print(f"throughput: {pages} pages, {len(lines)} lines, {size_mb:.3f} MB", file=sys.stderr, flush=True)
    results = alternate({"translate-file": as_document, "translate": as_lines}, rounds)
    back = read_docx(folder / "doc.de.docx")
    routes = {
        "translate-file doc.docx": medians(results["translate-file"]),
        "translate --split-sentences, a paragraph a line": medians(results["translate"]),
    }
    rows = [
        {
            "part": "throughput",
            "route": name,
            "s": figures["seconds"],
            "wall s": figures["wall_s"],
            "pages/s": round(pages / figures["seconds"], 3),
            "MB/s": round(size_mb / figures["seconds"], 4),
            "sent/s": round(sentences / figures["seconds"], 1),
            "pages/s wall": round(pages / figures["wall_s"], 3),
            "sent/s wall": round(sentences / figures["wall_s"], 1),
        }
        for name, figures in routes.items()
    ]
    base, other = (routes[name] for name in routes)
    rows.append(
        {
            "part": "throughput",
            "route": "translate-file / translate (time)",
            "s": round(base["seconds"] / other["seconds"], 3),
            "wall s": round(base["wall_s"] / other["wall_s"], 3),
        }
    )
    checks = {
        "pages": pages,
        "paragraphs": pages * PAGE_PARAGRAPHS,
        "sentences": sentences,
        "docx_bytes": source.stat().st_size,
        "text_bytes": text.stat().st_size,
        "rounds": results,
        "translate_file": summaries[-1],
        "translate_guard": guards[-1],
        "back": {
            "paragraphs_with_text": f"{len(back['texts'])}/{len(lines)}",
            "headings": back["headings"],
            "bold_runs": f"{back['bold_runs']}/{pages * PAGE_PARAGRAPHS // BOLD_EVERY}",
            "page_breaks": f"{back['page_breaks']}/{pages - 1}",
            "alike_with_lines": sum(a == b for a, b in zip(back["texts"], outputs["lines"])),
        },
    }
    return rows, checks


def run(args: argparse.Namespace) -> None:
    run_dir = demo_run(args, "documents")
    count = args.lines or (200 if args.small else 1000)
    pages = 5 if args.small else 50
    out = WORK / "documents" / ("small" if args.small else "full")
    sub_rows, sub_checks = subtitles(run_dir, count, out / "subtitles")
    doc_rows, doc_checks = throughput(run_dir, pages, args.rounds, out / "docx")
    name = f"{run_dir.parent.name}/{run_dir.name}"
    report = {"run": name, "subtitles": sub_checks, "throughput": doc_checks}
    result = write_results("documents", report, sub_rows + doc_rows)
    back = doc_checks["back"]
    append_notes(
        result,
        [
            f"{name}, en->de, the run's own search settings on both routes.",
            f"subtitles: test_2016_flickr's first {count} sentences in {sub_checks['cues']} cues (pairs of sentences "
            "in 3 cues: the middle cue holds the first's end and the second's start); BLEU per source sentence (its "
            "two cues' text joined; the middle cue counts in both), BLEU pairs per pair of sentences (each cue once). "
            f"translate-file found {sub_checks['translate_file']['guard'].get('sentences', '?')} sentences; timings "
            f"kept {sub_checks['timings_kept']}/{sub_checks['cues']}, empty cues {sub_checks['empty_cues']}, lines "
            f"over {WIDTH} characters {sub_checks['lines_over_width']}.",
            f"throughput: {pages} pages, {pages * PAGE_PARAGRAPHS} paragraphs of {PARAGRAPH_SENTENCES} sentences and "
            f"{pages} headings ({doc_checks['sentences']} sentences; as the splitter cuts them: translate-file "
            f"{doc_checks['translate_file']['guard'].get('sentences', '?')}, translate "
            f"{doc_checks['translate_guard'].get('sentences', '?')}), {doc_checks['docx_bytes']} bytes of .docx; "
            f"medians of {args.rounds} alternating rounds. s: the CLI's own translation seconds (model load "
            "excluded), wall s: the whole command; pages/s, MB/s and sent/s from s (MB/s: the .docx's size for both "
            "routes), the wall columns from wall s; the ratio row: translate-file's time over translate's.",
            f"the translated .docx: paragraphs with text {back['paragraphs_with_text']}, headings {back['headings']}, "
            f"bold runs {back['bold_runs']}, page breaks {back['page_breaks']}; paragraphs alike with the lines "
            f"route {back['alike_with_lines']}/{pages * (PAGE_PARAGRAPHS + 1)}.",
        ],
    )
