"""Debian's redis-server and nginx started for a test in a temporary folder, on free loopback ports, with their own
configuration and logs; `MISSING_*` names what is not installed, so a test skips at once saying which.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.conftest import ROOT

SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])  # nginx lives in /usr/sbin
REDIS = shutil.which("redis-server", path=SEARCH_PATH)
NGINX = shutil.which("nginx", path=SEARCH_PATH)
INSTALL = "apt-get install redis-server nginx"
START_S = 15
NGINX_CONF = ROOT / "recipes" / "deploy" / "nginx.conf"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        assert process.poll() is None, f"exited {process.returncode}:\n{log.read_text(errors='replace')}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"port {port} never opened:\n{log.read_text(errors='replace')}")


def stop(process: subprocess.Popen | None) -> None:
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Redis:
    """redis-server on 127.0.0.1, nothing saved to disk; stop() and start() again on the same port."""

    def __init__(self, root: Path) -> None:
        self.root, self.port = root, free_port()
        self.process: subprocess.Popen | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = self.root / "redis.log"
        options = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                [str(REDIS), *options, "--dir", str(self.root)], stdout=out, stderr=subprocess.STDOUT
            )
        wait_for_port(self.port, self.process, log)

    def stop(self) -> None:
        stop(self.process)


def nginx_conf(replica_ports: list[int], port: int, root: Path, text: str | None = None) -> str:
    """recipes/deploy/nginx.conf (or `text`) as written, its replicas and port replaced, its files kept in `root`."""
    text = NGINX_CONF.read_text(encoding="utf-8") if text is None else text
    servers = "".join(f"        server 127.0.0.1:{p} max_fails=2 fail_timeout=5s;\n" for p in replica_ports)
    text, found = re.subn(r"(        server 127\.0\.0\.1:\d+ [^\n]*\n)+", servers, text)
    assert found == 1, "nginx.conf's upstream changed shape"
    text, found = re.subn(r"listen 8080;", f"listen 127.0.0.1:{port};", text)
    assert found == 1
    files = "".join(
        f"    {name}_temp_path {root / name};\n" for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    logs = f"    access_log {root / 'access.log'};\n"
    return text.replace("http {\n", "http {\n" + files + logs, 1)


class Nginx:
    """nginx with recipes/deploy/nginx.conf in front of the replicas, in the foreground, in `root`."""

    def __init__(self, root: Path, replica_ports: list[int]) -> None:
        self.root, self.port = root, free_port()
        (root / "nginx.conf").write_text(nginx_conf(replica_ports, self.port, root), encoding="utf-8")
        log = root / "error.log"
        settings = f"daemon off; master_process off; pid {root / 'nginx.pid'}; error_log {log};"
        self.process = subprocess.Popen(
            [str(NGINX), "-p", str(root), "-c", str(root / "nginx.conf"), "-g", settings],
            stdout=subprocess.DEVNULL,
            stderr=open(root / "stderr.log", "wb"),  # noqa: SIM115 - the process keeps it
        )
        wait_for_port(self.port, self.process, root / "stderr.log")

    def stop(self) -> None:
        stop(self.process)
