"""`mtkit serve` under load, per engine: a server is started, 8 clients each keep one 8-line request in flight
until every test line was sent once, then the server gets SIGTERM. The server process is what the harness
measures (wall from launch to exit, CPU, peak RSS); reported besides: seconds to healthy, sentences/s over the
requests, and answers identical to the torch fp32 server's. Torch fp32 is the baseline.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness import WORK, alternate, checked, figures, finish, identical_lines, medians, ratios, start, write_results

from scenarios.workload import model, mtkit, test_source

SETTINGS = (("torch", "fp32"), ("ctranslate2", "float32"), ("ctranslate2", "int8"))
CLIENTS, LINES_PER_REQUEST = 8, 8


def post(port: int, lines: list[str]) -> list[str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    connection.request(
        "POST", "/translate", body=json.dumps({"text": lines, "beam": 4}), headers={"Content-Type": "application/json"}
    )
    response = connection.getresponse()
    answer = json.loads(response.read())
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {answer}")
    return answer["translations"]


def wait_healthy(log: Path, deadline_s: float = 300) -> int:
    """The port from the server's log line, once /health answers 200."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        found = re.search(r"on http://127\.0\.0\.1:(\d+) ", log.read_text(errors="replace") if log.is_file() else "")
        if found:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", int(found.group(1)), timeout=5)
                connection.request("GET", "/health")
                if connection.getresponse().status == 200:
                    return int(found.group(1))
            except OSError:
                pass
        time.sleep(0.05)
    raise SystemExit(f"mtkit serve did not become healthy; see {log}")


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
