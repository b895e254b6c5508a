"""A distilled corpus cleaned before a student learns from it: a teacher's translation that runs away (far longer
than its source in words, a phrase repeated in a row, or letters repeated in a row inside a word) teaches the
student to loop, so such a pair takes the human reference instead (or, without references, is dropped). So does,
given the teacher's own scores of its translations (`mtkit score-pairs --json`), the fraction it scores worst per
piece: the lines it was least sure of. Streams the three files once (the scores are read first, one float a line);
writes both sides atomically.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mtkit.errors import UserError, check
from mtkit.files import atomic_write, read_lines, resolve_prefix
from mtkit.text.guard import Guard

PUNCTUATION = ".,;:!?\"'()"
# A loop inside a word, of subword pieces: 2-4 letters 3 times or more in a row ("Oririririels", "VWWWWWW-Bus").
# In an ensemble's Multi30k training translations 175 of 29,000 lines stutter, in the references 1 (a typo).
STUTTER = re.compile(r"(\w{2,4})\1{2,}")


@dataclass(frozen=True)
class CleanConfig:
    """What makes a distilled translation a runaway: more than `max_ratio` x its source's words, or a phrase of up
    to 4 words repeated `max_repeats` times in a row."""

    max_ratio: float = field(
        default=2.0, metadata={"help": "A translation of more than this many times its source's words is a runaway."}
    )
    max_repeats: int = field(
        default=2, metadata={"help": "A phrase of up to 4 words repeated this many times in a row is a loop."}
    )
    worst: float = field(
        default=0.0,
        metadata={
            "help": "With --scores: this fraction of the pairs, those the teacher scores lowest per piece, take their "
            "references too (or are dropped)."
        },
    )

    def __post_init__(self) -> None:
        check(self.max_ratio > 0, f"--max-ratio must be positive; got {self.max_ratio}")
        check(self.max_repeats >= 2, f"--max-repeats must be 2 or more; got {self.max_repeats}")
        check(0 <= self.worst < 1, f"--worst must be at least 0 and below 1; got {self.worst}")

    @property
    def guard(self) -> Guard:
        return Guard(ratio=self.max_ratio, slack=0, max_repeats=self.max_repeats, max_phrase=4, short=0)


def runaway(cfg: CleanConfig, source: str, translation: str) -> str:
    """ "" for a translation a student may learn from; else why not: "long", "loop" or "stutter"."""
    words = translation.split()
    if len(words) > cfg.guard.limit(len(source.split())):
        return "long"
    bare = [word.strip(PUNCTUATION) for word in words]  # "im Schnee Schnee." repeats "Schnee"
    if cfg.guard.loop(bare) is not None:
        return "loop"
    return "stutter" if STUTTER.search(translation) else ""


def worst_lines(scores: Path, fraction: float) -> tuple[set[int], int]:
    """The line numbers (from 1) of the round(fraction x pairs) pairs with the lowest mean log-probability per piece
    in `scores` (score-pairs --json, one object a pair), and the number of pairs scored; a pair without a score
    counts as lowest, a tie goes to the earlier line."""
    means: list[float] = []
    for lineno, line in enumerate(read_lines(scores), 1):
        try:
            mean = json.loads(line)["mean"]
        except (ValueError, KeyError, TypeError):
            raise UserError(f"{scores}:{lineno}: not a line of `mtkit score-pairs --json`") from None
        means.append(float("-inf") if mean is None else float(mean))
    ranked = sorted(range(len(means)), key=lambda index: means[index])
    return {index + 1 for index in ranked[: round(fraction * len(means))]}, len(means)


def _triples(source: Path, distilled: Path, reference: Path | None) -> Iterator[tuple[int, str, str, str | None]]:
    """(line number, source, teacher's translation, reference or None), refusing files of different lengths."""
    names = [source, distilled] + ([reference] if reference else [])
    readers = [read_lines(path) for path in names]
    lineno = 0
    while True:
        lines = [next(reader, None) for reader in readers]
        if all(line is None for line in lines):
            return
        lineno += 1
        missing = [str(path) for path, line in zip(names, lines) if line is None]
        check(not missing, f"{', '.join(missing)}: ends at line {lineno - 1}, before {names[0]} does")
        yield lineno, lines[0], lines[1], lines[2] if reference else None  # type: ignore[misc]


def clean_distilled(
    prefix: Path,
    langs: tuple[str, str],
    out: Path,
    references: Path | None,
    cfg: CleanConfig,
    scores: Path | None = None,
) -> dict[str, object]:
    """PREFIX.SRC/.TGT (distill's output) -> OUT.SRC/.TGT; a runaway translation, or one of the cfg.worst fraction
    `scores` ranks lowest, replaced by REFERENCES.TGT's line (the same sources, line by line) or, without
    references, the pair dropped. Returns the counts."""
    src_lang, tgt_lang = langs
    source, distilled = resolve_prefix(prefix, src_lang), resolve_prefix(prefix, tgt_lang)
    reference = resolve_prefix(references, tgt_lang) if references is not None else None
    outputs = [Path(f"{out}.{src_lang}"), Path(f"{out}.{tgt_lang}")]
    check(not {source, distilled} & set(outputs), f"--out {out}: would overwrite the distilled corpus it reads")
    check(scores is not None or not cfg.worst, f"--worst {cfg.worst}: give --scores, the teacher's scores to rank by")
    if scores is not None:
        check(scores.is_file(), f"{scores}: no such file")
    worst, scored = worst_lines(scores, cfg.worst) if scores is not None else (set(), None)
    counts = {"pairs": 0, "kept": 0, "long": 0, "loop": 0, "stutter": 0, "worst": 0, "replaced": 0, "dropped": 0}
    with contextlib.ExitStack() as stack:
        src_out, tgt_out = (stack.enter_context(atomic_write(path, "wb")) for path in outputs)
        for lineno, src, hyp, ref in _triples(source, distilled, reference):
            counts["pairs"] += 1
            why = runaway(cfg, src, hyp) or ("worst" if lineno in worst else "")
            if why:
                counts[why] += 1
                counts["replaced" if ref is not None else "dropped"] += 1
                if ref is None:
                    continue
                hyp = ref
            counts["kept"] += 1
            src_out.write(f"{src}\n".encode())
            tgt_out.write(f"{hyp}\n".encode())
        # inside the writes: scores that do not fit leave no output behind
        check(scored in (None, counts["pairs"]), f"{scores}: {scored} scores for {counts['pairs']} pairs")
    return {**counts, "outputs": [str(path) for path in outputs]}
