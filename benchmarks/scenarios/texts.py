"""What the text scenarios (splitting, paragraphs, confidence, casing) share: Multi30k's test_2016_flickr lines and
paragraphs made of them, `mtkit translate` and `mtkit serve` run as child processes and asked over HTTP, corpus BLEU
with its length ratio, and notes appended to a result's .md.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import WORK, checked, finish, measure, post_json, start, wait_healthy

from scenarios.workload import mtkit

SENTENCE_END = (".", "!", "?")
CLIENTS, TEXTS_PER_REQUEST = 4, 16


def group(lines: Sequence[str], size: int) -> list[list[str]]:
    """Consecutive lines `size` at a time (the last group may be shorter)."""
    return [list(lines[i : i + size]) for i in range(0, len(lines), size)]


def joined(groups: Sequence[Sequence[str]]) -> list[str]:
    """Each group as one paragraph, its sentences joined by one space."""
    return [" ".join(g) for g in groups]


def ends_sentence(sentence: str) -> bool:
    """Ends with . ! or ? (the only sentences a splitter can find the end of)."""
    return sentence.rstrip().endswith(SENTENCE_END)


def demo_run(args: Any, scenario: str) -> Path:
    """--demo-run as a path, or SystemExit saying the scenario needs it."""
    if not args.demo_run:
        raise SystemExit(f"{scenario} needs --demo-run RUN (a trained en->de run directory)")
    run = Path(args.demo_run).resolve()
    if not run.is_dir():
        raise SystemExit(f"--demo-run {run}: no such directory")
    return run


def translate(run: Path, source: Path, out: Path, *flags: str) -> tuple[list[str], float, str]:
    """`mtkit translate RUN -i SOURCE -o OUT FLAGS`: its output lines, its own translation seconds (the
    "translated N lines in S s" line; else the process's wall) and its stderr."""
    log = WORK / "logs" / f"{out.parent.name}-{out.stem}"
    cmd = mtkit("translate", str(run), "-i", str(source), "-o", str(out), *flags)
    m = checked(measure(cmd, log), "mtkit translate " + " ".join(flags))
    found = re.search(r"translated \d+ lines in ([\d.]+) ?s", m.stderr)
    return out.read_text(encoding="utf-8").splitlines(), float(found.group(1)) if found else m.wall_s, m.stderr


def guard_from_log(stderr: str) -> dict[str, int]:
    """The guard's counts `mtkit translate --split-sentences` logs ("N sentences, N retried, ...")."""
    line = next((x for x in stderr.splitlines() if "the guard's counts" in x), "")
    return {key: int(value) for value, key in re.findall(r"(\d+) (\w+)", line.split("(")[0])}


@contextmanager
def served(run: Path, name: str, *flags: str) -> Iterator[int]:
    """`mtkit serve RUN --port 0` running until the block ends (then SIGTERM): its port."""
    log = WORK / "logs" / f"{name}-serve"
    server = start(mtkit("serve", str(run), "--port", "0", *flags), log)
    try:
        yield wait_healthy(log.with_suffix(".err"))
    finally:
        m = finish(server, timeout_s=120, stop=True)
        if m.returncode not in (0, -15):  # SIGTERM is how the server is stopped
            checked(m, "mtkit serve")


def post_all(port: int, texts: Sequence[str], body: dict[str, Any], field: str) -> list[dict[str, Any]]:
    """`texts` sent as `field` (a list) with the rest of `body`, TEXTS_PER_REQUEST a request, CLIENTS requests in
    flight: the answers in order."""
    chunks = [list(texts[i : i + TEXTS_PER_REQUEST]) for i in range(0, len(texts), TEXTS_PER_REQUEST)]
    with ThreadPoolExecutor(CLIENTS) as pool:
        return list(pool.map(lambda chunk: post_json(port, {**body, field: chunk}), chunks))


def bleu(hyps: Sequence[str], refs: Sequence[str], lowercase: bool = False) -> tuple[float, float]:
    """sacreBLEU (13a) and the length ratio (hypothesis / reference tokens)."""
    import sacrebleu

    if len(hyps) != len(refs):
        raise SystemExit(f"{len(hyps)} outputs for {len(refs)} references")
    result = sacrebleu.corpus_bleu(list(hyps), [list(refs)], lowercase=lowercase)
    return round(result.score, 2), round(result.sys_len / max(result.ref_len, 1), 3)


def append_notes(result: Path, notes: Sequence[str]) -> None:
    """Notes under the table of the .md beside a result's .json."""
    md = result.with_suffix(".md")
    md.write_text(md.read_text() + "\n" + "".join(f"- {note}\n" for note in notes))
