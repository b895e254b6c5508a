"""Sentences per second of `mtkit serve` replicas behind nginx against one replica asked directly.

    python benchmarks/serve_replicas.py RUN [--clients 8] [--seconds 30] [--lines 8] [-- SERVE OPTIONS...]

Three setups in turn, each with the same clients sending requests of --lines sentences from test_2016_flickr for
--seconds: (a) one replica, asked directly; (b) the same replica through nginx (recipes/deploy/nginx.conf, its
ports changed): what nginx costs; (c) two replicas through nginx, each given half the cores (--threads). Every
replica gets the SERVE OPTIONS after `--` (e.g. --engine ctranslate2). Prints one JSON object: sentences/s and
median latency of each, and the machine's cores. Needs Debian's nginx (apt-get install nginx); no Redis (no keys).
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MTKIT = Path(sys.executable).with_name("mtkit")
NGINX_CONF = ROOT / "recipes" / "deploy" / "nginx.conf"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(port: int, process: subprocess.Popen, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"a process on port {port} exited {process.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/ready")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"port {port} never ready")


def start_replica(run: str, port: int, threads: int, options: list[str], log: Path) -> subprocess.Popen:
    command = [str(MTKIT), "serve", run, "--port", str(port), "--threads", str(threads), *options]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=open(log, "wb"))  # noqa: SIM115
    wait_ready(port, process)
    return process


def start_nginx(ports: list[int], root: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    text = NGINX_CONF.read_text(encoding="utf-8")
    servers = "".join(f"        server 127.0.0.1:{p} max_fails=2 fail_timeout=5s;\n" for p in ports)
    text = re.sub(r"(        server 127\.0\.0\.1:\d+ [^\n]*\n)+", servers, text).replace(
        "listen 8080;", f"listen {port};"
    )
    temp = "".join(
        f"    {name}_temp_path {root / name};\n" for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    text = text.replace("http {\n", f"http {{\n{temp}    access_log off;\n", 1)
    (root / "nginx.conf").write_text(text, encoding="utf-8")
    nginx = shutil.which("nginx", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))
    if nginx is None:
        raise SystemExit("nginx is not installed: apt-get install nginx")
    settings = f"daemon off; master_process off; pid {root / 'nginx.pid'}; error_log {root / 'error.log'};"
    process = subprocess.Popen([nginx, "-p", str(root), "-c", str(root / "nginx.conf"), "-g", settings])
    time.sleep(0.5)
    return process, port


def load(port: int, clients: int, seconds: float, lines: list[str]) -> dict[str, float]:
    """`clients` threads sending `lines` for `seconds`: sentences per second and the median latency."""
    body = json.dumps({"text": lines}).encode()
    latencies: list[float] = []
    stop = time.monotonic() + seconds

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        while time.monotonic() < stop:
            started = time.perf_counter()
            connection.request("POST", "/translate", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            assert response.status == 200, response.status
            latencies.append(time.perf_counter() - started)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - began
    return {"sentences_per_s": len(latencies) * len(lines) / wall, "median_latency_s": statistics.median(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--lines", type=int, default=8)
    argv = sys.argv[1:]
    serve_options = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    with gzip.open(ROOT / "data" / "multi30k" / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as source:
        lines = [next(source).strip() for _ in range(args.lines)]
    cores = len(os.sched_getaffinity(0))
    results: dict[str, object] = {"cores": cores, "clients": args.clients, "lines_per_request": args.lines}
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        ports = [free_port(), free_port()]
        one = start_replica(args.run, ports[0], cores, serve_options, root / "replica-1.log")
        nginx = None
        try:
            results["one_direct"] = load(ports[0], args.clients, args.seconds, lines)
            nginx, port = start_nginx(ports[:1], root)
            results["one_via_nginx"] = load(port, args.clients, args.seconds, lines)
            nginx.terminate()
            one.terminate()
            one.wait()
            half = max(1, cores // 2)
            one = start_replica(args.run, ports[0], half, serve_options, root / "replica-1b.log")
            two = start_replica(args.run, ports[1], half, serve_options, root / "replica-2.log")
            try:
                nginx, port = start_nginx(ports, root)
                results["two_via_nginx"] = load(port, args.clients, args.seconds, lines)
            finally:
                two.terminate()
        finally:
            if nginx is not None:
                nginx.terminate()
            one.terminate()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
