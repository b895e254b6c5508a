"""`mtkit translate --input FILE --output OUT --shard K/N`: one shard's lines of a file translated into
OUT.shard-K-of-N as `mtkit translate` writes them (mtkit.engines.streaming's chunks of lines, output formats and
sentence splitting), chunk by chunk and resumable after a kill (mtkit.bulk.resumable); the shard that completes
the set merges it into OUT (mtkit.bulk.shard_sets). Torch-free: the engine does the model's part.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtkit.bulk.resumable import ResumableOutputs, translator_identity
from mtkit.bulk.shard_sets import Shard
from mtkit.bulk.shards import ShardSpec, chunked, read_line_range
from mtkit.console import log, progress
from mtkit.engines.plans import translate_split
from mtkit.engines.streaming import split_line, translate_lines
from mtkit.files import count_lines

if TYPE_CHECKING:
    from mtkit.engines.contract import Translating
    from mtkit.text.sentence_plan import SplitOptions


def translate_shard(
    translator: Translating,
    input: Path,
    output: Path,
    spec: ShardSpec,
    chunk_lines: int,
    options: dict[str, Any],
    with_scores: bool = False,
    strict: bool = False,
    prefix_file: Path | None = None,
    split: SplitOptions | None = None,
    overwrite: bool = False,
    quiet: bool = False,
    plain: SplitOptions | None = None,
) -> dict[str, Any]:
    """Translate shard `spec`'s lines of `input` into its file beside `output`, going on from an unfinished run of
    it, then merge the set if this shard completes it; returns the summary. Chunks of `chunk_lines` lines counted
    from the input's first line, as `mtkit translate` reads a file, so that a chunk holds the lines it holds there.
    `plain`: without `split`, each line's protected spans, glossary terms and case round trip, as there."""
    shard = Shard(
        output,
        spec,
        [output],
        "translate",
        translator_identity(translator, {"input": input}, options),
        count_lines(input),
        chunk_lines,
    )
    done = 0
    if overwrite or not shard.already_done():  # a done shard run again (a requeued task) has nothing to do
        shard.begin()
        outputs = ResumableOutputs(shard.progress, shard.files, shard.resume_identity(), overwrite)
        start = shard.start + outputs.done  # a whole number of chunks past the shard's first line
        if outputs.done:
            log(f"{shard.progress}: going on after line {start}")
        lines = read_line_range(input, start, shard.end, "replace")  # as mtkit translate reads its input
        prefixes = read_line_range(prefix_file, start, shard.end) if prefix_file is not None else None
        began = time.monotonic()
        with progress(quiet) as bar:
            task = bar.add_task(f"translate {spec.index}/{spec.count}", total=shard.end - start, info="")
            for chunk in chunked(lines, chunk_lines):
                if split is not None:
                    texts = translate_split(translator, chunk, split, strict)
                    alpha = translator.cfg.length_penalty
                    out = [split_line(text, alpha, with_scores, not split.split) for text in texts]
                else:
                    out, _ = translate_lines(
                        translator, chunk, start, with_scores, strict, prefixes, str(prefix_file), plain
                    )
                outputs.append(["\n".join(out) + "\n"], len(chunk))
                start += len(chunk)
                done += len(chunk)
                bar.update(task, advance=len(chunk), info=f"{done / max(time.monotonic() - began, 1e-9):.1f} sent/s")
    return {"translated": done, **shard.finish()}
