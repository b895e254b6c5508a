"""`mtkit serve` under load, per engine: 1, 8 and 32 concurrent clients of single lines and of 8-line requests.

For each server setting in `--servers` (default `torch:fp32,ctranslate2:float32,ctranslate2:int8`, engine:dtype),
runs `mtkit translate RUN --engine E --dtype D --beam 4` once on test_2016_flickr as the reference (with
CTranslate2 this also exports the run's model to its cache, so no server start pays for the export), then, in
`--rounds` alternating rounds, starts `mtkit serve RUN --engine E --dtype D --port 0` on 127.0.0.1 and, for each
request size and client count, sends every line once: each client keeps one request in flight on its own keep-alive
connection. Reported per setting: sentences/s over the wall time of all requests, p50/p99 request latency, lines
whose answer differs from that engine's `mtkit translate`, and per server: seconds from launch to healthy and peak
RSS (VmHWM, read before SIGTERM); the median over rounds, and each setting's ratio to the first server.
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
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import BENCH_OUT, ROOT, check_run, finite, mtkit_command, run_timed, thread_env  # noqa: E402
from bench_translate import read_test_set  # noqa: E402  (sibling scripts, not a package)

OUT = BENCH_OUT / "serve"
BEAM = 4


def server_name(setting: tuple[str, str]) -> str:
    return f"{setting[0]} {setting[1]}"


def cli_reference(run_dir: Path, source: Path, setting: tuple[str, str], args: argparse.Namespace) -> dict:
    """Whole-process `mtkit translate` with this engine and dtype: its outputs, sent/s after load, peak RSS."""
    engine, dtype = setting
    hyp = OUT / f"translate-{engine}-{dtype}.hyp"
    cmd = mtkit_command() + ["translate", str(run_dir), "--beam", str(BEAM), "--input", str(source), "--output",
                             str(hyp), "--engine", engine, "--dtype", dtype, "--device", args.device]
    cmd += ["--batch-tokens", str(args.max_batch_tokens)] if args.max_batch_tokens else []
    run = run_timed(cmd, thread_env(args.threads), OUT / f"translate-{engine}-{dtype}.log")
    check_run(run, f"mtkit translate --engine {engine} --dtype {dtype}")
    found = re.search(r"translated (\d+) lines in ([\d.]+)s", run.stderr)
    lines = hyp.read_text(encoding="utf-8").split("\n")[:-1]
    seconds = float(found.group(2)) if found else run.wall_s
    return {"hyps": lines, "sent_per_s": round(len(lines) / seconds, 1), "wall_s": round(run.wall_s, 2),
            "peak_rss_mib": finite(run.peak_rss_mib, 0)}


def start_server(run_dir: Path, setting: tuple[str, str], args: argparse.Namespace) -> tuple[subprocess.Popen, int, float]:
    """`mtkit serve RUN --port 0 ...`: (process, port read from its log line, seconds from launch to healthy)."""
    engine, dtype = setting
    log_path = OUT / f"server-{engine}-{dtype}.log"
    cmd = mtkit_command() + ["serve", str(run_dir), "--port", "0", "--device", args.device, "--engine", engine,
                             "--dtype", dtype, "--max-delay-ms", str(args.max_delay_ms),
                             "--max-lines", str(max(args.batch_sizes)), "--queue-size", str(max(64, max(args.clients)))]
    cmd += ["--max-batch-tokens", str(args.max_batch_tokens)] if args.max_batch_tokens else []
    launched = time.monotonic()
    with open(log_path, "w") as log:
        process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=thread_env(args.threads), cwd=ROOT)
    deadline = launched + 600
    while time.monotonic() < deadline:
        found = re.search(r"on http://127\.0\.0\.1:(\d+) ", log_path.read_text(errors="replace"))
        if found and healthy(int(found.group(1))):
            return process, int(found.group(1)), time.monotonic() - launched
        if process.poll() is not None:
            raise SystemExit(f"mtkit serve exited {process.returncode}; see {log_path}")
        time.sleep(0.05)
    process.kill()
    raise SystemExit(f"mtkit serve did not start in 10 minutes; see {log_path}")


def healthy(port: int) -> bool:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/health")
        return connection.getresponse().status == 200
    except OSError:
        return False


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM) so far, in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024


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


def measure(port: int, lines: list[str], reference: list[str], batch: int, clients: int) -> dict:
    requests = [list(range(i, min(i + batch, len(lines)))) for i in range(0, len(lines), batch)]
    wall, latencies, outputs = load(port, requests, lines, clients)
    return {
        "lines_per_request": batch, "clients": clients, "requests": len(requests), "wall_s": round(wall, 2),
        "sent_per_s": round(len(lines) / wall, 1),
        "p50_ms": round(percentile(latencies, 50) * 1000, 1), "p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "lines_differing_from_cli": sum(a != b for a, b in zip(outputs, reference)),
    }


def serve_round(run_dir: Path, setting: tuple[str, str], lines: list[str], reference: list[str],
                args: argparse.Namespace) -> dict:
    """One server start: every request size x client count, then its peak RSS and exit code."""
    process, port, ready_s = start_server(run_dir, setting, args)
    try:
        post(http.client.HTTPConnection("127.0.0.1", port, timeout=600), lines[:8])  # warm-up
        runs = [measure(port, lines, reference, batch, clients) for batch in args.batch_sizes for clients in args.clients]
        rss = peak_rss_mib(process.pid)
    finally:
        code = stop_server(process)
    return {"ready_s": round(ready_s, 2), "peak_rss_mib": round(rss), "exit_code": code, "runs": runs}


def median_runs(rounds: list[dict]) -> dict:
    """Per setting, the median of each figure over the rounds (differing lines: the largest)."""
    merged = []
    for index, first in enumerate(rounds[0]["runs"]):
        values = [r["runs"][index] for r in rounds]
        row = {key: first[key] for key in ("lines_per_request", "clients", "requests")}
        for key in ("sent_per_s", "p50_ms", "p99_ms", "wall_s"):
            row[key] = round(statistics.median(v[key] for v in values), 1)
        row["lines_differing_from_cli"] = max(v["lines_differing_from_cli"] for v in values)
        merged.append(row)
    return {"ready_s": round(statistics.median(r["ready_s"] for r in rounds), 2),
            "peak_rss_mib": round(statistics.median(r["peak_rss_mib"] for r in rounds)),
            "exit_codes": [r["exit_code"] for r in rounds], "runs": merged}


def markdown(report: dict) -> str:
    servers = report["servers"]
    base = servers[0]
    rows = [
        f"Model `{report['model']}`, {report['lines']} test_2016_flickr lines, beam {BEAM}, {report['device']}, "
        f"OMP_NUM_THREADS={report['threads']}, --max-delay-ms {report['max_delay_ms']}, --max-batch-tokens "
        f"{report['max_batch_tokens'] or 'run default'}; median of {report['rounds']} alternating round(s); "
        f"{report['machine']}. Ratios against {base['name']}.",
        "",
        "| server | start to healthy s | peak RSS MiB | RSS ratio | `mtkit translate` sent/s (after load) |",
        "|---|---:|---:|---:|---:|",
    ]
    for server in servers:
        rows.append(f"| {server['name']} | {server['ready_s']} | {server['peak_rss_mib']} | "
                    f"{server['peak_rss_mib'] / base['peak_rss_mib']:.2f} | {server['cli']['sent_per_s']} |")
    rows += ["", "| server | lines/request | clients | sent/s | throughput ratio | p50 ms | p99 ms | lines differing from its CLI |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for server in servers:
        for run, base_run in zip(server["runs"], base["runs"]):
            rows.append(f"| {server['name']} | {run['lines_per_request']} | {run['clients']} | {run['sent_per_s']} | "
                        f"{run['sent_per_s'] / base_run['sent_per_s']:.2f} | {run['p50_ms']} | {run['p99_ms']} | "
                        f"{run['lines_differing_from_cli']} |")
    return "\n".join(rows) + "\n"


def versions() -> str:
    """The engines' package versions, read without importing them."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for package in ("torch", "ctranslate2"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            pass
    return ", ".join(found)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="RUN_DIR to serve (e.g. the `make demo` run)")
    parser.add_argument("--servers", default="torch:fp32,ctranslate2:float32,ctranslate2:int8",
                        help="engine:dtype settings, compared in this order (ratios against the first)")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds of all servers (medians reported)")
    parser.add_argument("--lines", type=int, default=None, help="first N test_2016_flickr lines (default all 1,000)")
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--batch-sizes", default="1,8", help="lines per request")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of the servers and of translate")
    parser.add_argument("--max-delay-ms", type=float, default=5.0)
    parser.add_argument("--max-batch-tokens", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.servers = [tuple(s.split(":", 1)) for s in args.servers.split(",")]
    args.clients = [int(c) for c in args.clients.split(",")]
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    return args


def main() -> None:
    args = parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    source, lines, _ = read_test_set(args.lines)
    clis = {setting: cli_reference(args.model, source, setting, args) for setting in args.servers}
    rounds: dict[Any, list[dict]] = {setting: [] for setting in args.servers}
    for _ in range(args.rounds):
        for setting in args.servers:
            rounds[setting].append(serve_round(args.model, setting, lines, clis[setting]["hyps"], args))
    torch_hyps = next((clis[s]["hyps"] for s in args.servers if s[0] == "torch"), None)
    servers = [{"name": server_name(s), "engine": s[0], "dtype": s[1], **median_runs(rounds[s]),
                "cli": {k: v for k, v in clis[s].items() if k != "hyps"},
                "cli_lines_differing_from_torch": None if torch_hyps is None else
                sum(a != b for a, b in zip(clis[s]["hyps"], torch_hyps))}
               for s in args.servers]
    report = {
        "model": str(args.model), "lines": len(lines), "device": args.device, "threads": args.threads,
        "max_delay_ms": args.max_delay_ms, "max_batch_tokens": args.max_batch_tokens, "rounds": args.rounds,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {versions()}, {time.strftime('%Y-%m-%d')}",
        "servers": servers,
    }
    (OUT / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    (OUT / "results.md").write_text(markdown(report))
    print(json.dumps(report) if args.json else markdown(report))
    print(f"wrote {OUT / 'results.json'} and {OUT / 'results.md'} (server logs {OUT}/server-*.log)", file=sys.stderr)


if __name__ == "__main__":
    main()
