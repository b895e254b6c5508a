"""The system's own gettext catalogs filled by a model: every `<locale>/<lang>/LC_MESSAGES/*.mo` (German by default)
turned back into PO by msgunfmt, its translations emptied, and filled by RUN_DIR through mtkit.documents (the path
`mtkit translate-file` takes, all catalogs' strings in one batch). Reports per catalog and in all: `msgfmt --check`
passes (fuzzy entries included) and pofilter's failures (variables, printf, accelerators, xmltags) on the machine's
translations beside the human translators'. Not registered in run.py:

    .venv/bin/python benchmarks/scenarios/catalogs.py RUN_DIR [--language de] [--out bench-out/catalogs] [--limit N]
        [--engine ctranslate2] [--speed 5000 --rounds 3]

--speed N: instead, one catalog of the first N entries of those catalogs (a msgid met again keeps its entry in a
context of its catalog's name), timed as a whole process through `mtkit translate-file` against its distinct msgids
as lines through `mtkit translate`, rounds alternating; the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: run as a script, not by run.py
from harness import alternate, medians, ratios, translation_program, write_lines  # noqa: E402

from mtkit.bulk.document_translation import sentence_translator
from mtkit.documents.formats import open_job
from mtkit.documents.job import run_jobs
from mtkit.documents.po_file import read_catalog
from mtkit.engines.config import EngineConfig
from mtkit.engines.factory import load_translator

TESTS = ("variables", "printf", "accelerators", "xmltags")


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} is not installed (apt-get install gettext; pip install translate-toolkit)")
    return found


def emptied(data: bytes) -> bytes:
    """The catalog with every translation but the header's taken out."""
    catalog = read_catalog(data, "catalog.po")
    edits = []
    for entry in catalog.entries:
        if not entry.header:
            keys = [f"msgstr[{form}]" if entry.msgid_plural is not None else "msgstr" for form in sorted(entry.msgstr)]
            edits.append((entry.msgstr_line, entry.end, [f'{key} ""{catalog.newline}' for key in keys]))
    return catalog.written(edits).encode(catalog.charset)


def failures(path: Path) -> int:
    out = path.with_suffix(".pofilter.po")
    tests = [arg for test in TESTS for arg in ("-t", test)]
    command = [_tool("pofilter"), "--progress=none", *tests, "-i", str(path), "-o", str(out)]
    subprocess.run(command, check=True, capture_output=True)
    return len(re.findall(r"^# \(pofilter\)", out.read_text(encoding="utf-8"), re.M)) if out.exists() else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--language", default="de")
    parser.add_argument("--source", default="en")
    parser.add_argument("--out", default="bench-out/catalogs")
    parser.add_argument("--limit", type=int, default=0, help="only the first N catalogs")
    parser.add_argument("--engine", default="torch", choices=("torch", "ctranslate2"))
    parser.add_argument("--speed", type=int, default=0, help="time a catalog of this many entries (see above)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    roots = [Path(sys.prefix) / "share" / "locale", Path("/usr/share/locale"), Path("/usr/local/share/locale")]
    mos = sorted({path for root in roots for path in root.glob(f"{args.language}/LC_MESSAGES/*.mo")})
    mos = mos[: args.limit] if args.limit else mos
    if not mos:
        raise SystemExit(f"no compiled catalogs for {args.language} on this system")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    humans, jobs = [], []
    for mo in mos:
        human = out / f"{mo.stem}.human.po"
        subprocess.run([_tool("msgunfmt"), str(mo), "-o", str(human)], check=True, capture_output=True)
        humans.append(human)
        if args.speed:
            continue
        jobs.append(open_job(human.name, emptied(human.read_bytes()), args.source, target=args.language))
    if args.speed:
        print(json.dumps(speed(args, humans, out)))
        return
    translator = load_translator(args.run_dir, EngineConfig(engine=args.engine))
    translate, _ = sentence_translator(translator, args.source)
    start = time.perf_counter()
    documents = run_jobs(jobs, translate)
    seconds = time.perf_counter() - start
    rows = []
    for human, job, document in zip(humans, jobs, documents):
        machine = human.with_name(human.name.replace(".human.po", ".machine.po"))
        machine.write_bytes(document)
        check = [_tool("msgfmt"), "--check", "--use-fuzzy", "-o", "/dev/null", str(machine)]
        passed = subprocess.run(check, capture_output=True).returncode == 0
        rows.append(
            {
                "catalog": human.stem.removesuffix(".human"),
                "entries": job.counts["entries"],
                "msgfmt": passed,
                "pofilter_machine": failures(machine),
                "pofilter_human": failures(human),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    summary = {
        "catalogs": len(rows),
        "msgfmt_passes": sum(row["msgfmt"] for row in rows),
        "pofilter_machine": sum(row["pofilter_machine"] for row in rows),
        "pofilter_human": sum(row["pofilter_human"] for row in rows),
        "sentences": sum(len(job.texts) for job in jobs),
        "seconds": round(seconds, 1),
    }
    (out / "results.json").write_text(json.dumps({"summary": summary, "catalogs": rows}, indent=1) + "\n")
    print(json.dumps(summary))


def speed(args: argparse.Namespace, humans: list[Path], out: Path) -> dict:
    """A catalog of args.speed entries through translate-file against its distinct msgids as lines through
    translate, whole processes, rounds alternating."""
    import polib

    merged, seen = polib.POFile(), set()
    merged.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Language": args.language}
    for human in humans:
        for entry in polib.pofile(str(human)):
            if len(merged) == args.speed or entry.obsolete or not entry.msgid:
                continue
            if (entry.msgctxt, entry.msgid) in seen:
                entry.msgctxt = human.stem.removesuffix(".human")  # the same msgid again, in its catalog's context
            seen.add((entry.msgctxt, entry.msgid))
            entry.msgstr, entry.msgstr_plural = "", dict.fromkeys(entry.msgstr_plural, "")
            merged.append(entry)
    catalog = out / "speed.po"
    merged.save(str(catalog))
    distinct = list(dict.fromkeys(t for e in merged for t in (e.msgid, e.msgid_plural) if t))
    lines = write_lines(out / "speed.msgids.txt", [" ".join(text.split()) for text in distinct])
    mtkit = [str(Path(sys.executable).parent / "mtkit")]
    engine = ["--engine", args.engine]
    programs = {
        "msgids as lines": translation_program(
            "translate",
            [*mtkit, "translate", args.run_dir, "--input", str(lines), "--output", str(out / "speed.txt"), *engine],
            len(distinct),
            out / "speed.translate.log",
        ),
        "the catalog": translation_program(
            "translate-file",
            [*mtkit, "translate-file", args.run_dir, str(catalog), "--out", str(out / "speed.de.po"), *engine],
            len(distinct),
            out / "speed.translate-file.log",
        ),
    }
    results = alternate(programs, args.rounds)
    return {
        "entries": len(merged),
        "distinct_msgids": len(distinct),
        "medians": {name: medians(rounds) for name, rounds in results.items()},
        "ratios": ratios(results),
    }


if __name__ == "__main__":
    main()
