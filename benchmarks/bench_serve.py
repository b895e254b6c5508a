"""`mtkit serve` under load: 1, 8 and 32 concurrent clients against the same lines through `mtkit translate` once.

Starts `mtkit serve RUN` in a subprocess on 127.0.0.1, then for each request size (single lines, small batches)
and each client count, sends every test_2016_flickr line once: each client keeps one request in flight (sends
the next when its answer arrives) on its own keep-alive connection. Reports sentences/s over the wall time of
all requests, p50/p99 request latency, and how many answers differ from `mtkit translate` (beam 4 in both).
Writes bench-out/serve/results.json and results.md. Usage: python benchmarks/bench_serve.py --model RUN [--json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import BENCH_OUT, ROOT, mtkit_command, thread_env  # noqa: E402  (sibling scripts, not a package)
from bench_translate import cli_translate, read_test_set  # noqa: E402

OUT = BENCH_OUT / "serve"
BEAM = 4


def start_server(run_dir: Path, args: argparse.Namespace) -> tuple[subprocess.Popen, int, Path]:
    """`mtkit serve RUN --port 0 ...`; its port read from its `serving ... on http://127.0.0.1:PORT` line."""
    log_path = OUT / "server.log"
    cmd = mtkit_command() + ["serve", str(run_dir), "--port", "0", "--device", args.device, "--dtype", args.dtype,
                             "--max-delay-ms", str(args.max_delay_ms), "--max-lines", str(max(args.batch_sizes))]
    cmd += ["--max-batch-tokens", str(args.max_batch_tokens)] if args.max_batch_tokens else []
    with open(log_path, "w") as log:
        process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=thread_env(args.threads), cwd=ROOT)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        found = re.search(r"on http://127\.0\.0\.1:(\d+) ", log_path.read_text(errors="replace"))
        if found and healthy(int(found.group(1))):
            return process, int(found.group(1)), log_path
        if process.poll() is not None:
            raise SystemExit(f"mtkit serve exited {process.returncode}; see {log_path}")
        time.sleep(0.2)
    process.kill()
    raise SystemExit(f"mtkit serve did not start in 10 minutes; see {log_path}")


def healthy(port: int) -> bool:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/health")
        return connection.getresponse().status == 200
    except OSError:
        return False


def stop_server(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=120)


def post(connection: http.client.HTTPConnection, lines: list[str]) -> list[str]:
    body = json.dumps({"text": lines, "beam": BEAM}).encode()
    connection.request("POST", "/translate", body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {answer}")
    return answer["translations"]


def load(port: int, requests: list[list[int]], lines: list[str], clients: int) -> tuple[float, list[float], list[str]]:
    """Every request sent once by `clients` closed-loop clients: (wall seconds, latencies, outputs in line order)."""
    outputs = [""] * len(lines)
    latencies: list[float] = []
    next_request = iter(range(len(requests)))
    lock = threading.Lock()
    errors: list[BaseException] = []

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        try:
            while True:
                with lock:
                    index = next(next_request, None)
                if index is None:
                    return
                rows = requests[index]
                sent = time.perf_counter()
                answer = post(connection, [lines[i] for i in rows])
                with lock:
                    latencies.append(time.perf_counter() - sent)
                for row, text in zip(rows, answer):
                    outputs[row] = text
        except BaseException as exc:  # noqa: BLE001 - reported after the threads end
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    if errors:
        raise SystemExit(f"a client failed: {errors[0]!r}")
    return wall, latencies, outputs


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def measure(port: int, lines: list[str], reference: list[str], batch: int, clients: int, cli_rate: float) -> dict:
    requests = [list(range(i, min(i + batch, len(lines)))) for i in range(0, len(lines), batch)]
    wall, latencies, outputs = load(port, requests, lines, clients)
    rate = len(lines) / wall
    return {
        "lines_per_request": batch, "clients": clients, "requests": len(requests), "wall_s": round(wall, 2),
        "sent_per_s": round(rate, 1), "vs_cli": round(rate / cli_rate, 2),
        "p50_ms": round(percentile(latencies, 50) * 1000, 1), "p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "lines_differing_from_cli": sum(a != b for a, b in zip(outputs, reference)),
    }


def markdown(report: dict) -> str:
    cli = report["cli"]
    rows = [
        f"Model `{report['model']}`, {report['lines']} test_2016_flickr lines, beam {BEAM}, {report['device']} "
        f"{report['dtype']}, OMP_NUM_THREADS={report['threads']}, --max-delay-ms {report['max_delay_ms']}, "
        f"--max-batch-tokens {report['max_batch_tokens'] or 'run default'}; {report['machine']}.",
        "",
        "| mode | lines/request | clients | sent/s | vs translate | p50 ms | p99 ms | lines differing |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        f"| `mtkit translate` once (after load; whole process {cli['wall_s']} s) | all | 1 | {cli['sent_per_s']} | 1.00 | - | - | - |",
    ]
    for run in report["runs"]:
        rows.append(f"| `mtkit serve` | {run['lines_per_request']} | {run['clients']} | {run['sent_per_s']} | "
                    f"{run['vs_cli']:.2f} | {run['p50_ms']} | {run['p99_ms']} | {run['lines_differing_from_cli']} |")
    return "\n".join(rows) + "\n"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="RUN_DIR to serve (e.g. the `make demo` run)")
    parser.add_argument("--lines", type=int, default=None, help="first N test_2016_flickr lines (default all 1,000)")
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--batch-sizes", default="1,8", help="lines per request")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of the server and of translate")
    parser.add_argument("--max-delay-ms", type=float, default=5.0)
    parser.add_argument("--max-batch-tokens", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    return args


def main() -> None:
    args = parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    source, lines, _ = read_test_set(args.lines)
    cli = cli_translate(args.model, source, args.dtype, args.device, args.max_batch_tokens, args.threads)
    cli_rate = len(lines) / cli["seconds"]
    process, port, log_path = start_server(args.model, args)
    try:
        post(http.client.HTTPConnection("127.0.0.1", port, timeout=600), lines[:8])  # warm-up
        runs = [measure(port, lines, cli["hyps"], batch, clients, cli_rate)
                for batch in args.batch_sizes for clients in args.clients]
    finally:
        code = stop_server(process)
    import torch

    report = {
        "model": str(args.model), "lines": len(lines), "device": args.device, "dtype": args.dtype, "threads": args.threads,
        "max_delay_ms": args.max_delay_ms, "max_batch_tokens": args.max_batch_tokens, "server_exit_code": code,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}",
        "cli": {"sent_per_s": round(cli_rate, 1), "seconds": round(cli["seconds"], 2), "wall_s": cli["wall_s"]},
        "runs": runs,
    }
    (OUT / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    (OUT / "results.md").write_text(markdown(report))
    print(json.dumps(report) if args.json else markdown(report))
    print(f"wrote {OUT / 'results.json'} and {OUT / 'results.md'} (server log {log_path})", file=sys.stderr)


if __name__ == "__main__":
    main()
