"""GET /metrics and GET /ready on a real `mtkit serve` process: the exposition read back by Prometheus' own text
parser, its counters equal to the requests this test sent; readiness 503 until the model is warm and during a
SIGTERM drain (--drain-seconds), 200 otherwise; the Readiness object's reasons one by one.
"""

from __future__ import annotations

import asyncio
import http.client
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from mtkit.serve.readiness import Readiness
from tests.serve.test_app import REQUEST_TIMEOUT_S, Server

pytest.importorskip("prometheus_client", reason="prometheus-client is not installed: pip install -e '.[serve]'")


def get_text(server: Server, path: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=REQUEST_TIMEOUT_S)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8")
    finally:
        connection.close()


def samples(server: Server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of GET /metrics by (name, sorted labels), as Prometheus' text parser reads them."""
    from prometheus_client.parser import text_string_to_metric_families

    status, text = get_text(server, "/metrics")
    assert status == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found: dict, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def wait_ready(server: Server, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while server.request("GET", "/ready")[0] != 200:
        assert time.monotonic() < deadline, server.request("GET", "/ready")[2]
        time.sleep(0.05)


def test_metrics_count_the_requests_sent(tiny_run: Path, tmp_path: Path, flickr_lines: list[str]) -> None:
    server = Server(tiny_run, tmp_path / "stderr.log", "--max-delay-ms", "1")
    try:
        wait_ready(server)
        before = samples(server)
        lines = [line for line in flickr_lines if line.strip()][:3]
        for _ in range(4):
            assert server.translate({"text": lines})[0] == 200
        for _ in range(3):
            assert server.translate({"q": lines[0], "source": "en", "target": "de"})[0] == 200
        assert server.translate({"text": []})[0] == 422
        assert server.request("GET", "/no/such/path")[0] == 404
        health = 1  # the worker marks a request done just after its answer is on its way: wait for it on /health
        while server.pending():
            health += 1
            time.sleep(0.02)
        after = samples(server)
    finally:
        server.stop()

    def sent(route: str, api: str, status: str) -> float:
        labels = {"route": route, "api": api, "status": status}
        return value(after, "mtkit_requests_total", **labels) - value(before, "mtkit_requests_total", **labels)

    assert sent("/translate", "mtkit", "200") == 4
    assert sent("/translate", "libretranslate", "200") == 3
    assert sent("/translate", "mtkit", "422") == 1
    assert sent("other", "mtkit", "404") == 1  # an unknown path is one label, never the path itself
    assert sent("/health", "mtkit", "200") == health
    assert sent("/metrics", "mtkit", "200") == 1  # the first scrape, counted once answered
    model = tiny_run.name
    latency = value(after, "mtkit_request_seconds_count", route="/translate", model=model)
    assert latency - value(before, "mtkit_request_seconds_count", route="/translate", model=model) == 7
    sentences = value(after, "mtkit_translated_sentences_total", model=model)
    assert sentences - value(before, "mtkit_translated_sentences_total", model=model) >= 4 * 3 + 3
    assert value(after, "mtkit_translated_characters_total", model=model) > sum(len(line) for line in lines)
    assert value(after, "mtkit_translated_tokens_total", model=model, side="target") > 0
    assert value(after, "mtkit_batch_lines_count", model=model) >= 1
    assert (("mtkit_queue_depth", (("model", model),)) in after) and value(after, "mtkit_queue_depth", model=model) == 0
    # bounded labels only: no client address, key or text in any label value
    assert not any(lines[0] in str(labels) or "127.0.0.1" in str(labels) for _, labels in after)


def test_ready_fails_first_during_a_drain(tiny_run: Path, tmp_path: Path) -> None:
    """SIGTERM with --drain-seconds: /ready answers 503 at once while translation still answers, then exit 0."""
    server = Server(tiny_run, tmp_path / "stderr.log", "--drain-seconds", "3")
    wait_ready(server)
    assert server.request("GET", "/ready")[2] == {"status": "ready"}
    server.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 2
    while (answer := server.request("GET", "/ready"))[0] != 503:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert answer[2]["reason"].startswith("draining")
    assert server.translate({"text": ["A dog runs."]})[0] == 200  # still served while the balancer catches up
    try:
        assert server.process.wait(timeout=60) == 0
    except subprocess.TimeoutExpired:
        server.process.kill()
        raise
    assert "draining: GET /ready answers 503" in server.log.read_text()


class FakeWorker:
    def __init__(self) -> None:
        self.alive = True
        self.warmed = threading.Event()
        self.warm_up_error = ""


def test_readiness_reasons() -> None:
    """Loading, warm, a stopped worker, an unanswering store, a failed warm-up and a drain, each named."""
    model = SimpleNamespace(name="en-de", worker=FakeWorker())
    store = {"problem": ""}
    readiness = Readiness(SimpleNamespace(models=[model]), lambda: store["problem"])  # type: ignore[arg-type]
    check = lambda: asyncio.run(readiness.check())  # noqa: E731
    assert check() == "en-de: loading (warm-up not finished)"
    model.worker.warmed.set()
    assert check() == ""
    store["problem"] = "redis://127.0.0.1:1/0 does not answer"
    assert check() == "state store: redis://127.0.0.1:1/0 does not answer"
    store["problem"] = ""
    model.worker.alive = False
    assert check() == "en-de: its worker has stopped"
    model.worker.alive = True
    readiness.draining = True
    assert check().startswith("draining")
    readiness.draining = False
    model.worker.warm_up_error = "RuntimeError: out of memory"
    assert check() == "en-de: warm-up failed: RuntimeError: out of memory"


def test_a_server_without_prometheus_client_or_redis_still_serves(tiny_run: Path, tmp_path: Path) -> None:
    """The single server needs nothing new: without prometheus-client and redis-py importable it translates, is
    ready, and answers /metrics 503 saying what to install."""
    without = (
        sys.executable,
        "-c",
        "import sys; sys.modules['prometheus_client'] = sys.modules['redis'] = None; "
        "from mtkit.cli.main import main; main()",
    )
    server = Server(tiny_run, tmp_path / "stderr.log", command=without)
    try:
        wait_ready(server)
        assert server.translate({"text": ["A dog runs."]})[0] == 200
        status, _, answer = server.request("GET", "/metrics")
        assert status == 503 and "pip install" in answer["error"]
        assert "metrics disabled" in server.log.read_text()
    finally:
        server.stop()
