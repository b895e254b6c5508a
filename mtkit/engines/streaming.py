"""Streaming translation for any engine, what `mtkit translate` runs: read input in chunks (a pause ends one),
translate each chunk, write its outputs in mtkit.engines.output's formats, in input order.

Imports no torch: works over any translator with `tokenizer`, `cfg` and `translate_hypotheses` (mtkit.engines.contract's
`Translating`: mtkit.engines.torch_engine.TorchTranslator or mtkit.engines.ct2.CT2Translator).
"""

from __future__ import annotations

import itertools
import queue
import time
from collections import Counter
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any, BinaryIO

from mtkit.console import log, progress
from mtkit.engines.output import confidence, format_output, output_line, scored_rows
from mtkit.engines.plans import translate_split, translate_whole_lines
from mtkit.errors import check
from mtkit.files import read_stream_lines
from mtkit.readahead import END, ReadAhead
from mtkit.search.config import length_penalty
from mtkit.text.line_plan import prepare_line
from mtkit.text.sentence_plan import (
    GUARD_LABELS,
    SplitOptions,
    TextTranslation,
    guard_counts,
    term_counts,
    text_logprob,
)

if TYPE_CHECKING:
    from mtkit.engines.contract import Translating

CHUNK_LINES = 2000  # lines read, sorted by length and translated together before output
# A chunk also ends when no line has arrived for this long: a file or a fast pipe delivers its next line within
# microseconds, so it still fills whole chunks, while a line from a person or a client is translated at once.
PAUSE_SECONDS = 0.05


def translate_stream(
    translator: Translating,
    source: BinaryIO,
    target: IO[str],
    with_scores: bool = False,
    strict: bool = False,
    quiet: bool = False,
    name: str = "<stdin>",
    prefixes: Iterator[str] | None = None,
    prefix_name: str = "",
    split: SplitOptions | None = None,
    plain: SplitOptions | None = None,
) -> int:
    """Translate `source` line by line into `target`, chunk by chunk; returns the number of lines.

    `prefixes` (lines of the file `prefix_name`, one per input line, empty for none): text each translation must
    begin with; a count that differs from the input's is a one-line error. `split`: each line translated sentence
    by sentence (mtkit.text.sentence_plan, best only), the guard's counts logged at the end. `plain`: without
    `split`, each line keeps its protected spans and glossary terms and is translated in sentence case
    (mtkit.text.line_plan); None sends the lines as they are.
    """
    chunks = read_paused_chunks(source, name, CHUNK_LINES, PAUSE_SECONDS)
    done = 0
    counts = dict.fromkeys(("sentences", *GUARD_LABELS, "protected"), 0)
    term_totals = dict.fromkeys(("terms", "terms_applied"), 0)  # glossary terms asked and in the output
    ways: Counter[str] = Counter()  # the sentences (or lines) with glossary terms, by the way their terms went
    start = time.monotonic()
    try:
        with progress(quiet) as bar:
            task = bar.add_task("translate", total=None, info="")
            for chunk in chunks:
                if split is not None:
                    texts = translate_split(translator, chunk, split, strict)
                    alpha = translator.cfg.length_penalty
                    out = [split_line(text, alpha, with_scores, not split.split) for text in texts]
                    counts = {key: counts[key] + value for key, value in guard_counts(texts).items()}
                    terms = [term for text in texts for sentence in text.sentences for term in sentence.terms]
                    ways.update(sentence.method for text in texts for sentence in text.sentences if sentence.terms)
                else:
                    terms: list[dict[str, Any]] = []
                    out, protected = translate_lines(
                        translator, chunk, done, with_scores, strict, prefixes, prefix_name, plain, terms, ways
                    )
                    counts["protected"] += protected
                for key, value in term_counts(terms).items():
                    term_totals[key] += value
                target.write("\n".join(out) + "\n")
                target.flush()
                done += len(chunk)
                rate = done / max(time.monotonic() - start, 1e-9)
                bar.update(task, completed=done, info=f"{rate:.1f} sent/s")
        check(
            prefixes is None or next(prefixes, None) is None,
            f"{prefix_name}: more lines than the input's {done}; give one prefix per input line (empty for none)",
        )
    finally:
        chunks.close()  # stops the reader thread when translation failed before the input ended
    if not quiet and done:
        seconds = time.monotonic() - start
        log(f"translated {done} lines in {seconds:.2f}s ({done / max(seconds, 1e-9):.1f} sent/s)")
        if split is not None:
            log(", ".join(f"{value} {key}" for key, value in counts.items()) + " (sentences; the guard's counts)")
        elif counts["protected"]:
            log(f"{counts['protected']} spans kept as written (placeholders, URLs, numbers: mtkit.text.protect)")
        if term_totals["terms"]:
            applied = f"{term_totals['terms_applied']} of {term_totals['terms']} terms in the output"
            log(f"glossary ({(split or plain).term_method}): {applied}; {term_ways_note(ways)}")
    return done


def term_ways_note(ways: Counter[str]) -> str:
    """How many sentences (or lines) with glossary terms went which way (mtkit.text.glossary: the model's own
    translation, inline, a hint, placeholders), for the summary: "sentences by way: model 2, placeholder 1"."""
    return "sentences by way: " + ", ".join(f"{way} {count}" for way, count in sorted(ways.items()))


def translate_lines(
    translator: Translating,
    chunk: list[str],
    done: int,
    with_scores: bool,
    strict: bool,
    prefixes: Iterator[str] | None,
    prefix_name: str,
    plain: SplitOptions | None = None,
    terms: list[dict[str, Any]] | None = None,
    ways: Counter[str] | None = None,
) -> tuple[list[str], int]:
    """A chunk translated one line one segment by the line plan (mtkit.engines.plans.translate_whole_lines): its
    output lines, n-best rows included, and the spans it kept as written. `plain` None: the lines sent as they are.
    `terms` gets each best output's glossary terms (source, target, applied), `ways` a count of the way each line
    with terms took."""
    forced = None if prefixes is None else take_prefixes(prefixes, len(chunk), prefix_name, done)
    lines = None if plain is None else [prepare_line(line, plain, prefixes is None) for line in chunk]
    lines, results = translate_whole_lines(translator, chunk, lines, strict, forced, done + 1)
    out = []
    for offset, (rows, hyps) in enumerate(zip(scored_rows(translator.tokenizer, results), results)):
        best = confidence(hyps[0]) if hyps else 0.0
        line = None if lines is None else lines[offset]
        # A line whose terms the model was left to carries them as written, so it is finished too, for its report.
        if line is not None and (line.asked != chunk[offset] or line.prepared.found):
            finished = [(line.finish(text), score) for text, score in rows or [("", 0.0)]]
            rows = [(text, score) for (text, _), score in finished]
            if terms is not None:
                terms.extend(finished[0][0][1])
            if ways is not None and line.prepared.found:
                ways[line.method] += 1
        out.extend(format_output(rows, done + offset, translator.cfg.nbest, with_scores, best))
    return out, sum(line.prepared.protected for line in lines or [])


def split_line(translation: TextTranslation, alpha: float, with_scores: bool, strip: bool = False) -> str:
    """A line translated sentence by sentence as one output line; with scores, the line's log-prob under the
    search's length penalty and per token, over all its sentences (one sentence: the unsplit line's figures).
    `strip`: without the white space around it, as the one-a-line path writes a line (a blank line stays empty)."""
    text = output_line(translation.text)
    text = text.strip() if strip else text
    if not with_scores:
        return text
    logprob, tokens = text_logprob(translation)
    score, per_token = (logprob / length_penalty(tokens, alpha), logprob / tokens) if tokens else (0.0, 0.0)
    return f"{score:.4f}\t{per_token:.4f}\t{text}"


def take_prefixes(prefixes: Iterator[str], count: int, name: str, done: int) -> list[str]:
    """The next `count` prefix lines; fewer left than input lines is a one-line error naming the file."""
    taken = list(itertools.islice(prefixes, count))
    check(
        len(taken) == count,
        f"{name}: {done + len(taken)} lines, but the input has more; give one prefix per input line (empty for none)",
    )
    return taken


def read_paused_chunks(source: BinaryIO, name: str, max_lines: int, pause: float) -> Iterator[list[str]]:
    """Lists of up to `max_lines` lines of `source`: a list ends when full, at the end, or when no line has come
    for `pause` seconds. A reader error (mtkit.files' one-line UserError among them) is raised here, in the
    caller's thread.

    The lines are read ahead on a thread (two chunks: the next chunk is ready while one is translated). Closing
    the generator stops it; one still blocked on an open, silent stdin is left to die with the process.
    """
    lines = ReadAhead(read_stream_lines(source, name), 2 * max_lines, "mtkit-read")
    try:
        while (item := lines.get()) is not END:  # the first line of a chunk: wait as long as the input does
            chunk = [item]
            while len(chunk) < max_lines:
                try:
                    item = lines.get(timeout=pause)
                except queue.Empty:
                    break
                if item is END:
                    break
                chunk.append(item)
            yield chunk  # type: ignore[misc]
            if item is END:
                return
    finally:
        lines.close(timeout=1.0)
