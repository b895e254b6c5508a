"""Translation memories (docs/memories.md): the import rate of a TMX of --segments pairs (Multi30k's train pairs,
recombined half by half into new sentences up to that count) into an SQLite state file, the index's build time,
the saved index's opening time (as every process after the import opens it), the lookup's p50/p95 over Multi30k's
test_2016_flickr sources at threshold 75, and, with --run, `mtkit translate`
of test_2016_flickr with and without a memory of the train pairs (and of the large one): seconds, BLEU, the ratio.

    python benchmarks/scenarios/memories.py --segments 1000000 [--run runs/m30k] [--out bench-out/memories]

Prints one JSON object; measured figures go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mtkit.memory.matching import MemoryIndex  # noqa: E402
from mtkit.memory.tmx import TmxReader, write_tmx  # noqa: E402
from mtkit.serve.memory_state import import_memory, memory_index  # noqa: E402
from mtkit.serve.state import SqliteState  # noqa: E402

MULTI30K = ROOT / "data" / "multi30k"


def lines(name: str) -> list[str]:
    with gzip.open(MULTI30K / name, "rt", encoding="utf-8") as found:
        return [line.rstrip("\n") for line in found]


def recombined(pairs: list[tuple[str, str]], count: int, seed: int = 1) -> list[tuple[str, str]]:
    """The pairs, then new ones made of one pair's first half and another's second half, both sides, to `count`."""
    rng = random.Random(seed)
    out = list(pairs[:count])
    while len(out) < count:
        (a_src, a_tgt), (b_src, b_tgt) = rng.choice(pairs), rng.choice(pairs)
        a, b, c, d = a_src.split(), b_src.split(), a_tgt.split(), b_tgt.split()
        out.append((" ".join(a[: len(a) // 2] + b[len(b) // 2 :]), " ".join(c[: len(c) // 2] + d[len(d) // 2 :])))
    return out


def translate_seconds(run: str, source: Path, state: Path, memory: str | None) -> tuple[float, list[str]]:
    command = [sys.executable, "-m", "mtkit", "translate", run, "-i", str(source), "-q"]
    command += ["--memory", memory, "--state", str(state)] if memory else []
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    return time.perf_counter() - start, done.stdout.splitlines()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=1_000_000)
    parser.add_argument("--run", default="", help="a run directory to translate test_2016_flickr with")
    parser.add_argument("--out", default=str(ROOT / "bench-out" / "memories"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    train = list(zip(lines("train.en.gz"), lines("train.de.gz")))
    tests, references = lines("test_2016_flickr.en.gz"), lines("test_2016_flickr.de.gz")
    results: dict[str, object] = {"segments": args.segments}
    for name, pairs in (("train", train), ("large", recombined(train, args.segments))):
        with open(out / f"{name}.tmx", "wb") as stream:
            write_tmx(iter(pairs), stream, "en", "de")
    state = out / "state.sqlite3"
    state.unlink(missing_ok=True)
    store = SqliteState(state)
    for name in ("train", "large"):
        start = time.perf_counter()
        with open(out / f"{name}.tmx", "rb") as stream:
            record, _ = import_memory(store.memories, TmxReader(stream, f"{name}.tmx"), "", name, True)
        results[f"{name}_import_segments_per_s"] = round(record.segment_count / (time.perf_counter() - start))
    start = time.perf_counter()
    MemoryIndex(store.memories.pairs(record.memory_id))
    results["large_index_build_s"] = round(time.perf_counter() - start, 2)  # as the import built and saved it
    start = time.perf_counter()
    index = memory_index(store.memories, record)
    results["large_index_open_ms"] = round(1000 * (time.perf_counter() - start), 2)  # as each later process opens it
    timings = []
    for sentence in tests:
        start = time.perf_counter()
        index.best(sentence, 75)
        timings.append(time.perf_counter() - start)
    timings.sort()
    results["lookup_p50_ms"] = round(1000 * timings[len(timings) // 2], 3)
    results["lookup_p95_ms"] = round(1000 * timings[int(len(timings) * 0.95)], 3)
    store.close()
    if args.run:
        import sacrebleu

        source = out / "test_2016_flickr.en"
        source.write_text("\n".join(tests) + "\n", encoding="utf-8")
        for memory in (None, "train", "large"):
            seconds, translated = translate_seconds(args.run, source, state, memory)
            label = memory or "none"
            results[f"translate_{label}_s"] = round(seconds, 2)
            results[f"translate_{label}_bleu"] = round(sacrebleu.corpus_bleu(translated, [references]).score, 2)
        results["ratio_large_to_none"] = round(results["translate_large_s"] / results["translate_none_s"], 3)  # type: ignore[operator]
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
