"""Streaming translation for any engine: read input in chunks (a pause ends one), translate each chunk, write the
outputs in the formats of `mtkit translate` (one line, `--scores`, n-best rows).

Imports no torch: works over any translator with `tokenizer`, `cfg` and `translate_hypotheses` (mtkit.engine's
`Translating`: mtkit.translate.Translator or mtkit.ct2engine.CT2Translator).
"""

from __future__ import annotations

import itertools
import math
import queue
import time
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, BinaryIO

from mtkit.console import log, progress
from mtkit.decoding import Hypothesis
from mtkit.errors import check
from mtkit.files import read_stream_lines
from mtkit.readahead import END, ReadAhead

if TYPE_CHECKING:
    from mtkit.engine import Translating
    from mtkit.tokenizer import Tokenizer

CHUNK_LINES = 2000  # lines read, sorted by length and translated together before output
# A chunk also ends when no line has arrived for this long: a file or a fast pipe delivers its next line within
# microseconds, so it still fills whole chunks, while a line from a person or a client is translated at once.
PAUSE_SECONDS = 0.05


def one_line(text: str) -> str:
    """A decoded text as one output line: byte-fallback pieces can decode to "\n" or "\r", which would split it."""
    return text.replace("\r", " ").replace("\n", " ")


def decode(tokenizer: Tokenizer, ids: list[list[int]]) -> list[str]:
    """Texts of `ids` in one call (a call per line cost 0.1 s per 1,000 lines, 2% of a CTranslate2 run of the demo
    model on a 2-core Zen 4, 2026-11-25); none without asking the tokenizer."""
    return tokenizer.decode(ids) if ids else []


def best_lines(tokenizer: Tokenizer, hypotheses: list[list[Hypothesis]]) -> list[str]:
    """Each input's best hypothesis as one output line; "" for an input without one (an empty line)."""
    texts = iter(decode(tokenizer, [hyps[0].tokens for hyps in hypotheses if hyps]))
    return [one_line(next(texts)) if hyps else "" for hyps in hypotheses]


def scored_rows(tokenizer: Tokenizer, hypotheses: list[list[Hypothesis]]) -> list[list[tuple[str, float]]]:
    """(text as one line, score) of each hypothesis of each input, best first; [] for an input without any."""
    texts = iter(decode(tokenizer, [h.tokens for hyps in hypotheses for h in hyps]))
    return [[(one_line(next(texts)), h.score) for h in hyps] for hyps in hypotheses]


def scored_texts(tokenizer: Tokenizer, hyps: list[Hypothesis]) -> list[tuple[str, float]]:
    """scored_rows of one input."""
    return scored_rows(tokenizer, [hyps])[0]


def format_output(rows: list[tuple[str, float]], index: int, nbest: int, with_scores: bool) -> list[str]:
    """One line per input (nbest 1), or `INDEX<TAB>RANK<TAB>SCORE<TAB>TEXT` lines for each of the n best, from the
    input's scored_rows."""
    rows = rows or [("", 0.0)]
    if nbest == 1:
        return [f"{rows[0][1]:.4f}\t{rows[0][0]}" if with_scores else rows[0][0]]
    rows = rows + [("", -math.inf)] * (nbest - len(rows))
    return [f"{index}\t{rank}\t{score:.4f}\t{text}" for rank, (text, score) in enumerate(rows[:nbest])]


def length_batches(lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """Translation batches: non-empty inputs' indices, by length, grouped so n * (longest + 1) <= batch_tokens.

    Plain Python (mtkit.batching, the training sampler, needs numpy: 15 MiB more at start-up).

    A sentence longer than the budget still gets a batch of its own.
    """
    order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        width = lengths[index] + 1
        if current and (len(current) + 1) * width > batch_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


def translate_stream(
    translator: Translating, source: BinaryIO, target: IO[str], with_scores: bool = False, strict: bool = False,
    quiet: bool = False, name: str = "<stdin>", prefixes: Iterator[str] | None = None, prefix_name: str = "",
) -> int:
    """Translate `source` line by line into `target`, chunk by chunk; returns the number of lines.

    `prefixes` (lines of the file `prefix_name`, one per input line, empty for none): text each translation must
    begin with; a count that differs from the input's is a one-line error.
    """
    chunks = read_chunks(source, name, CHUNK_LINES, PAUSE_SECONDS)
    done = 0
    start = time.monotonic()
    try:
        with progress(quiet) as bar:
            task = bar.add_task("translate", total=None, info="")
            for chunk in chunks:
                forced = {} if prefixes is None else {"prefixes": take_prefixes(prefixes, len(chunk), prefix_name, done)}
                results = translator.translate_hypotheses(chunk, first_lineno=done + 1, strict=strict, **forced)
                out = []
                for offset, rows in enumerate(scored_rows(translator.tokenizer, results)):
                    out.extend(format_output(rows, done + offset, translator.cfg.nbest, with_scores))
                target.write("\n".join(out) + "\n")
                target.flush()
                done += len(chunk)
                rate = done / max(time.monotonic() - start, 1e-9)
                bar.update(task, completed=done, info=f"{rate:.1f} sent/s")
        check(prefixes is None or next(prefixes, None) is None,
              f"{prefix_name}: more lines than the input's {done}; give one prefix per input line (empty for none)")
    finally:
        chunks.close()  # stops the reader thread when translation failed before the input ended
    if not quiet and done:
        seconds = time.monotonic() - start
        log(f"translated {done} lines in {seconds:.2f}s ({done / max(seconds, 1e-9):.1f} sent/s)")
    return done


def take_prefixes(prefixes: Iterator[str], count: int, name: str, done: int) -> list[str]:
    """The next `count` prefix lines; fewer left than input lines is a one-line error naming the file."""
    taken = list(itertools.islice(prefixes, count))
    check(len(taken) == count, f"{name}: {done + len(taken)} lines, but the input has more; give one prefix per "
                               "input line (empty for none)")
    return taken


def read_chunks(source: BinaryIO, name: str, max_lines: int, pause: float) -> Iterator[list[str]]:
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
