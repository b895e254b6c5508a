"""Software strings (recipes/software-en-de): held-out packages' gettext catalogs, each package's entries split
80% into a translation memory and 20% into a test catalog (seeded), the test catalog translated by `mtkit
translate-file` as a translator's tool would, without and with `--memory`, and scored per entry against the
packages' own translations (chrF, BLEU) by fuzzy band (the entry's best match in the memory, as `mtkit memory`
scores it: 100, 75-99, 50-74, below 50 or none), beside the match's own target copied. Also the share of outputs
that keep their source's placeholders (printf, Python, braces), `msgfmt --check` on each output, and pofilter's
failures (variables, printf, accelerators, xmltags) on each output and on the packages' own translations.

    python benchmarks/scenarios/software.py --run runs/software --catalogs data/software-en-de/test

Prints one JSON object; measured figures go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from mtkit.documents.ui_strings import UNFLAGGED  # noqa: E402
from mtkit.memory.matching import MemoryIndex  # noqa: E402
from mtkit.memory.tmx import write_tmx  # noqa: E402
from scenarios.catalogs import failures  # noqa: E402

BANDS = ((100, 100, "100"), (75, 99, "75-99"), (50, 74, "50-74"), (0, 49, "below 50"))
MEMORY_SHARE = 0.8
_PLACEHOLDER = re.compile(UNFLAGGED)


def catalog_entries(path: Path) -> list[tuple[str, str]]:
    """A compiled catalog's translated entries, singular ones only, as (msgid, msgstr)."""
    import polib

    return [
        (entry.msgid, entry.msgstr)
        for entry in polib.mofile(str(path))
        if entry.msgid and entry.msgstr and not entry.msgid_plural
    ]


def split_packages(folder: Path, seed: int) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """Every package's entries shuffled and cut 80/20: the memory's pairs, and the test's (package, msgid, msgstr)
    with each msgid once in the test (a catalog's repeated msgid would be counted twice)."""
    memory, test = [], []
    for path in sorted(folder.glob("*.mo")):
        entries = catalog_entries(path)
        random.Random(f"{seed}:{path.stem}").shuffle(entries)
        cut = round(len(entries) * MEMORY_SHARE)
        memory += entries[:cut]
        test += [(path.stem, source, target) for source, target in entries[cut:]]
    seen: set[str] = set()
    test = [entry for entry in test if not (entry[1] in seen or seen.add(entry[1]))]  # type: ignore[func-returns-value]
    return memory, test


def write_catalog(path: Path, sources: list[str], targets: list[str] | None = None) -> None:
    import polib

    catalog = polib.POFile()
    catalog.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Language": "de"}
    for k, source in enumerate(sources):
        catalog.append(polib.POEntry(msgid=source, msgstr=targets[k] if targets else ""))
    catalog.save(str(path))


def translated(path: Path) -> dict[str, str]:
    import polib

    return {entry.msgid: entry.msgstr for entry in polib.pofile(str(path))}


def mtkit(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mtkit", *args], check=True, cwd=ROOT, capture_output=True)
    return time.perf_counter() - start


def scores(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    import sacrebleu

    flat = [h.replace("\n", " ") for h in hypotheses], [r.replace("\n", " ") for r in references]
    return {
        "chrf": round(sacrebleu.corpus_chrf(flat[0], [flat[1]]).score, 2),
        "bleu": round(sacrebleu.corpus_bleu(flat[0], [flat[1]]).score, 2),
    }


def placeholders_kept(sources: list[str], outputs: list[str]) -> tuple[int, int]:
    """Of the sources holding a placeholder, how many outputs hold the same ones (as a multiset)."""
    held = [(Counter(_PLACEHOLDER.findall(s)), o) for s, o in zip(sources, outputs) if _PLACEHOLDER.search(s)]
    return sum(Counter(_PLACEHOLDER.findall(o)) == wanted for wanted, o in held), len(held)


def msgfmt_ok(path: Path) -> bool | None:
    if shutil.which("msgfmt") is None:
        return None
    return subprocess.run(["msgfmt", "--check", "-o", "/dev/null", str(path)], capture_output=True).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="the run directory (its averaged model)")
    parser.add_argument("--catalogs", required=True, help="a folder of held-out packages' .mo catalogs")
    parser.add_argument("--out", default=str(ROOT / "bench-out" / "software"))
    parser.add_argument("--threshold", type=int, default=75, help="--memory-threshold")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--length-penalty", default="", help="over the run's recipe (its [translate])")
    args = parser.parse_args()
    search = ("--length-penalty", args.length_penalty) if args.length_penalty else ()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    memory, test = split_packages(Path(args.catalogs), args.seed)
    with open(out / "memory.tmx", "wb") as stream:
        write_tmx(iter(memory), stream, "en", "de")
    state = out / "state.sqlite3"
    state.unlink(missing_ok=True)
    mtkit("memory", "import", str(out / "memory.tmx"), "--name", "held-out", "--state", str(state))
    sources, references = [s for _, s, _ in test], [t for _, _, t in test]
    write_catalog(out / "test.po", sources)
    write_catalog(out / "human.po", sources, references)
    seconds = {
        "plain": mtkit("translate-file", args.run, str(out / "test.po"), "-o", str(out / "plain.po"), *search),
        "memory": mtkit(
            "translate-file", args.run, str(out / "test.po"), "-o", str(out / "memory.po"),
            "--memory", "held-out", "--state", str(state), "--memory-threshold", str(args.threshold), *search,
        ),
    }  # fmt: skip
    outputs = {way: translated(out / f"{way}.po") for way in ("plain", "memory")}
    index = MemoryIndex(memory)
    matches = [index.best(source, BANDS[-2][0]) for source in sources]
    results: dict[str, object] = {
        "packages": len({package for package, _, _ in test}),
        "memory_pairs": len(memory),
        "test_entries": len(test),
        "threshold": args.threshold,
        "length_penalty": args.length_penalty or "the run's",
        "seconds": {way: round(value, 2) for way, value in seconds.items()},
        "msgfmt_check": {way: msgfmt_ok(out / f"{way}.po") for way in ("plain", "memory")},
        "pofilter_failures": {way: failures(out / f"{way}.po") for way in ("plain", "memory", "human")},
    }
    for way in ("plain", "memory"):
        hyps = [outputs[way].get(source, "") for source in sources]
        results[way] = scores(hyps, references)
        kept, held = placeholders_kept(sources, hyps)
        results[f"{way}_placeholders_kept"] = f"{kept}/{held}"
    bands: dict[str, object] = {}
    for low, high, label in BANDS:
        chosen = [i for i, m in enumerate(matches) if low <= (m.score if m is not None else 0) <= high]
        if not chosen:
            continue
        refs = [references[i] for i in chosen]
        band: dict[str, object] = {"entries": len(chosen)}
        for way in ("plain", "memory"):
            band[way] = scores([outputs[way].get(sources[i], "") for i in chosen], refs)
        if low >= BANDS[-2][0]:
            band["match_target"] = scores([matches[i].target for i in chosen], refs)  # type: ignore[union-attr]
        if label == "100":
            # The match scores 100 over normalised white space; the entry keeps its msgid's own around and within.
            band["answered_with_memory"] = sum(
                " ".join(outputs["memory"].get(sources[i], "").split()) == " ".join(matches[i].translation.split())
                for i in chosen
            )  # type: ignore[union-attr]
            band["answered_as_stored"] = sum(
                outputs["memory"].get(sources[i]) == matches[i].translation for i in chosen
            )  # type: ignore[union-attr]
        bands[label] = band
    results["bands"] = bands
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
