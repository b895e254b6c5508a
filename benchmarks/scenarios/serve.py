"""`mtkit serve` under load, per engine: a server is started, 8 clients each keep one 8-line request in flight
until every test line was sent once, then the server gets SIGTERM. The server process is what the harness
measures (wall from launch to exit, CPU, peak RSS); reported besides: seconds to healthy, sentences/s over the
requests, and answers identical to the torch fp32 server's. Torch fp32 is the baseline.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import (
    WORK,
    alternate,
    checked,
    figures,
    finish,
    identical_lines,
    medians,
    post_json,
    ratios,
    start,
    wait_healthy,
    write_results,
)

from scenarios.workload import model, mtkit, test_source

SETTINGS = (("torch", "fp32"), ("ctranslate2", "float32"), ("ctranslate2", "int8"))
CLIENTS, LINES_PER_REQUEST = 8, 8


def post(port: int, lines: list[str]) -> list[str]:
    return post_json(port, {"text": lines, "beam": 4}, timeout_s=300)["translations"]


def program(run: Path, engine: str, dtype: str, lines: list[str], outputs: dict[str, list[str]]):
    name = f"{engine} {dtype}"

    def once(round_: int) -> dict[str, float]:
        log = WORK / "logs" / f"serve-{engine}-{dtype}"
        server = start(mtkit("serve", str(run), "--port", "0", "--engine", engine, "--dtype", dtype), log)
        try:
            port = wait_healthy(log.with_suffix(".err"))
            ready = time.monotonic() - server.start
            chunks = [lines[i : i + LINES_PER_REQUEST] for i in range(0, len(lines), LINES_PER_REQUEST)]
            began = time.monotonic()
            with ThreadPoolExecutor(CLIENTS) as pool:
                answers = [line for chunk in pool.map(lambda c: post(port, c), chunks) for line in chunk]
            seconds = time.monotonic() - began
        finally:
            m = finish(server, timeout_s=120, stop=True)
        outputs[name] = answers
        if m.returncode not in (0, -15):  # SIGTERM is how the server is stopped
            checked(m, f"mtkit serve {name}")
        return {**figures(m), "ready_s": round(ready, 2), "sent_per_s": round(len(lines) / seconds, 1)}

    return once


def run(args: argparse.Namespace) -> None:
    count = 200 if args.small else 1000
    run_dir, lines = model(100 if args.small else 1000), test_source(count).read_text().splitlines()
    for dtype in ("float32", "int8"):  # the CTranslate2 export happens on first use: not in a timed server start
        warm = mtkit("translate", str(run_dir), "--engine", "ctranslate2", "--dtype", dtype, "-i", str(test_source(1)))
        checked(finish(start(warm, WORK / "logs" / f"warm-{dtype}")), "mtkit translate --engine ctranslate2")
    outputs: dict[str, list[str]] = {}
    results = alternate({f"{e} {d}": program(run_dir, e, d, lines, outputs) for e, d in SETTINGS}, args.rounds)
    rel = ratios(results)
    rows = [
        {
            "server": name,
            "clients x lines": f"{CLIENTS} x {LINES_PER_REQUEST}",
            **medians(r),
            "sent/s vs torch fp32": rel[name].get("sent_per_s"),
            "RSS vs torch fp32": rel[name].get("peak_rss_mib"),
            "answers as torch fp32": f"{identical_lines(outputs['torch fp32'], outputs[name])}/{count}",
        }
        for name, r in results.items()
    ]
    write_results("serve", {"rounds": results}, rows)
