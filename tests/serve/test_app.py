"""`mtkit serve` as a client sees it: a real server process on 127.0.0.1, a real HTTP client (http.client).

Answers equal `mtkit translate`; every bad input is a 4xx JSON error and leaves the service working;
a full queue is a 503 with Retry-After; SIGTERM finishes the request in flight and exits 0.
"""

from __future__ import annotations

import http.client
import json
import re
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_mtkit_in_process

MTKIT = Path(sys.executable).with_name("mtkit")  # the console script users run
# `mtkit` in a process where `import torch` fails: what a torch-free path must survive.
MTKIT_WITHOUT_TORCH = (
    sys.executable,
    "-c",
    "import sys; sys.modules['torch'] = None; from mtkit.cli.main import main; main()",
)
START_TIMEOUT_S = 180  # torch import and model load on a busy 2-core machine
REQUEST_TIMEOUT_S = 120


class Server:
    """`mtkit serve RUN --port 0 ...` in its own process; its port read from its log line on stderr."""

    def __init__(self, run: Path, log: Path, *options: str, command: tuple[str, ...] = (str(MTKIT),)) -> None:
        self.log = log
        with open(log, "wb") as stderr:
            self.process = subprocess.Popen(
                [*command, "serve", str(run), "--port", "0", "--device", "cpu", *options],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        try:
            self.port = self._wait_for_port()
            self._wait_until_healthy()
        except BaseException:  # a server that never became healthy is not left running
            self.process.kill()
            self.process.wait(timeout=60)
            raise

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            found = re.search(r"on http://127\.0\.0\.1:(\d+) ", self.log.read_text(errors="replace"))
            if found:
                return int(found.group(1))
            assert self.process.poll() is None, f"server exited {self.process.returncode}:\n{self.log.read_text()}"
            time.sleep(0.1)
        raise AssertionError(f"server did not start:\n{self.log.read_text()}")

    def _wait_until_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                if self.request("GET", "/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"server never healthy:\n{self.log.read_text()}")

    def request(
        self, method: str, path: str, body: Any = None, headers: dict | None = None, chunked: bool = False
    ) -> tuple[int, dict[str, str], Any]:
        """(status, headers, decoded JSON body) of one request on a fresh connection."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT_S)
        try:
            connection.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), json.loads(response.read())
        finally:
            connection.close()

    def translate(self, payload: Any) -> tuple[int, dict[str, str], Any]:
        return self.request("POST", "/translate", json.dumps(payload).encode(), {"Content-Type": "application/json"})

    def pending(self) -> int:
        return self.request("GET", "/health")[2]["pending"]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def wait_for(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


SMALL_LIMITS = ("--max-lines", "16", "--max-bytes", "8192", "--max-delay-ms", "20", "--body-timeout", "2")


@pytest.fixture(scope="module")
def server(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory):
    """Small limits so that the 413s are cheap to provoke."""
    started = Server(tiny_run, tmp_path_factory.mktemp("serve") / "stderr.log", *SMALL_LIMITS)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def busy_server(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory):
    """One request at a time, held 2 s for company: the second concurrent request finds the queue full."""
    started = Server(
        tiny_run,
        tmp_path_factory.mktemp("serve-busy") / "stderr.log",
        "--strict",
        "--queue-size",
        "1",
        "--max-delay-ms",
        "2000",
        "--max-batch-tokens",
        "100000",
    )
    yield started
    started.stop()


@pytest.fixture(scope="module")
def cli_translations(tiny_run: Path, flickr_lines: list[str]) -> list[str]:
    """The same lines through `mtkit translate --split-sentences`, as the server translates them by default."""
    return cli_output(tiny_run, flickr_lines, "--split-sentences")


@pytest.mark.exactness
def test_answers_equal_mtkit_translate(
    server: Server, tiny_run: Path, flickr_lines: list[str], cli_translations: list[str]
) -> None:
    assert len(cli_translations) == len(flickr_lines)
    status, _, answer = server.translate({"text": flickr_lines})
    assert status == 200 and answer["translations"] == cli_translations
    assert answer["guard"]["sentences"] == sum(len(row) for row in answer["sentences"]) >= 12
    unsplit = server.translate({"text": flickr_lines, "split_sentences": False})[2]
    assert unsplit["translations"] == cli_output(tiny_run, flickr_lines)
    assert all(c is None or c < 0 for c in unsplit["confidences"])
    # Concurrent clients, batched together by the worker: each still gets its own lines' translations.
    chunks = [list(range(i, min(i + 3, len(flickr_lines)))) for i in range(0, len(flickr_lines), 3)]
    with ThreadPoolExecutor(len(chunks)) as pool:
        answers = list(pool.map(lambda rows: server.translate({"text": [flickr_lines[i] for i in rows]}), chunks))
    for rows, (status, _, answer) in zip(chunks, answers):
        assert status == 200 and answer["translations"] == [cli_translations[i] for i in rows]


def test_paragraphs_come_back_sentence_by_sentence_white_space_as_written(
    server: Server, flickr_lines: list[str]
) -> None:
    """Three sentences in one text translate as each alone, joined by the text's own white space; each sentence
    has its confidence; "split_sentences": false is one segment a line, as before; nbest and prefix ask for it."""
    sentences = [line if line.endswith(".") else line + "." for line in flickr_lines[:3]]
    alone = server.translate({"text": sentences})[2]["translations"]
    paragraph = f"  {sentences[0]} {sentences[1]}\n\n{sentences[2]} "
    status, _, answer = server.translate({"text": [paragraph]})
    assert status == 200 and answer["translations"] == [f"  {alone[0]} {alone[1]}\n\n{alone[2]} "]
    assert [s["source"] for s in answer["sentences"][0]] == sentences
    assert all(s["confidence"] < 0 and s["word_confidence"] < 0 for s in answer["sentences"][0])
    guarded = sum(answer["guard"][label] for label in ("retried", "kept", "tamed"))
    assert answer["guard"]["sentences"] == 3 and guarded == sum(bool(s["guard"]) for s in answer["sentences"][0])
    whole = server.translate({"text": [paragraph], "split_sentences": False})[2]["translations"]
    assert whole != answer["translations"] and "\n" not in whole[0]
    status, _, answer = server.translate({"text": [paragraph], "nbest": 2})
    assert status == 200 and len(answer["translations"][0]) == 2  # n-best of the whole line
    status, _, answer = server.translate({"text": [paragraph], "nbest": 2, "split_sentences": True})
    assert status == 422 and "split_sentences" in answer["error"]
    assert server.translate({"text": ["A dog."], "split_sentences": "no"})[0] == 422


def test_beam_and_nbest_per_request(server: Server, tiny_run: Path, flickr_lines: list[str]) -> None:
    from mtkit.engines.torch_engine import TorchTranslator

    lines = flickr_lines[:4]
    greedy = server.translate({"text": lines, "beam": 1, "split_sentences": False})[2]["translations"]
    assert greedy == cli_output(tiny_run, lines, "--beam", "1")  # guarded alike
    assert greedy != cli_output(tiny_run, lines)  # beam 1 was asked for, not the recipe's beam
    translator = TorchTranslator.load(tiny_run, beam=3, nbest=2)
    expected = [
        [translator.tokenizer.decode([h.tokens])[0] for h in hyps] for hyps in translator.translate_hypotheses(lines)
    ]
    status, _, answer = server.translate({"text": lines + [""], "beam": 3, "nbest": 2})
    assert status == 200 and [[h["text"] for h in row] for row in answer["translations"]] == expected + [[]]
    assert all(isinstance(h["score"], float) for row in answer["translations"] for h in row)


PREFIXES = ["Ein Mann", "", "Zwei"]  # forced beginnings of lines 0 and 2; line 1 translates freely


def cli_output(run: Path, lines: list[str], *options: str, prefix_file: Path | None = None) -> list[str]:
    """`mtkit translate RUN --device cpu -q OPTIONS` of `lines`, its output lines (the command run in this process:
    the servers are the processes under test here)."""
    extra = ("--prefix-file", str(prefix_file)) if prefix_file else ()
    done = run_mtkit_in_process(
        "translate", run, "--device", "cpu", "-q", *options, *extra, stdin="\n".join(lines) + "\n"
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\n")[:-1]


def check_prefixes(target: Server, run: Path, lines: list[str], tmp_path: Path, *engine: str) -> None:
    """Forced prefixes answer as `mtkit translate --prefix-file`; a line without one as without any."""
    lines = lines[: len(PREFIXES)]
    (tmp_path / "prefixes.txt").write_text("\n".join(PREFIXES) + "\n", encoding="utf-8")
    expected = cli_output(run, lines, *engine, prefix_file=tmp_path / "prefixes.txt")
    status, _, answer = target.translate({"text": lines, "prefix": PREFIXES})
    assert status == 200 and answer["translations"] == expected
    assert all(text.startswith(prefix) for text, prefix in zip(expected, PREFIXES))
    assert expected[1] == target.translate({"text": lines[1:2], "split_sentences": False})[2]["translations"][0]


def test_prefixes_answer_as_the_cli(server: Server, tiny_run: Path, flickr_lines: list[str], tmp_path: Path) -> None:
    check_prefixes(server, tiny_run, flickr_lines, tmp_path)


def test_health_and_info(server: Server, tiny_run: Path) -> None:
    assert server.request("GET", "/health")[:3:2] == (200, {"status": "ok", "pending": 0})
    status, _, info = server.request("GET", "/info")
    assert status == 200
    assert (info["source_lang"], info["target_lang"], info["vocab_size"]) == ("en", "de", 1000)
    assert info["model"]["arch"] == "tiny" and info["model"]["d_model"] == 64 and info["model"]["parameters"] > 0
    assert info["recipe"]["train"]["max_steps"] == 150 and info["device"] == "cpu" and info["dtype"] == "fp32"
    assert info["engine"] == "torch" and info["workers"] == 1 and info["shortlist"] is False
    assert info["limits"]["max_lines"] == 16 and (info["name"], info["checkpoint"]) == (tiny_run.name, "average.pt")
    # a public server shows no file system: no path of the model's in any answer a client can ask for (the page
    # shows /info's)
    answers = [server.request("GET", path)[2] for path in ("/info", "/languages", "/frontend/settings")]
    assert all(str(tiny_run.parent) not in json.dumps(answer) for answer in answers)
    assert "data/" not in json.dumps(info) and "init_from" not in json.dumps(info)
    assert "on http://127.0.0.1:" in server.log.read_text()  # loopback by default


def test_small_requests_are_answered_without_a_network_stall(server: Server) -> None:
    """Responses go out at once (TCP_NODELAY): without it each one waited ~40 ms for the client's delayed ACK."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=REQUEST_TIMEOUT_S)
    times = []
    for _ in range(15):  # one keep-alive connection, as a client library keeps
        start = time.perf_counter()
        connection.request("GET", "/health")
        assert connection.getresponse().read()
        times.append(time.perf_counter() - start)
    connection.close()
    assert sorted(times)[len(times) // 2] < 0.02


# Request parsing is proved field by field in tests/serve/test_request.py; here, once for this engine, that a
# refusal reaches a real client as a JSON 4xx, the refusals the parser cannot make (a body over --max-bytes, with
# or without a Content-Length; a prefix over the model's length) included, and that the service keeps working.
BAD_REQUESTS = [
    (b'{"text": ["A dog."', 400, "malformed JSON"),
    (b'{"text": ["A dog."], "lines": 1}', 422, "unknown field"),
    (b'{"lines": ["A dog."]}', 400, "Invalid request: missing q parameter"),  # neither API's: LibreTranslate's 400
    (b'["A dog."]', 400, "must be a JSON object"),
    (json.dumps({"text": ["A dog."] * 17}).encode(), 413, "--max-lines"),
    (json.dumps({"text": ["A dog. " * 1200]}).encode(), 413, "--max-bytes"),
    (json.dumps({"text": ["A dog."], "prefix": ["Hund " * 1100]}).encode(), 422, "prefix[0]: "),
]


def check_bad_requests_are_answered(target: Server, requests: list[tuple[bytes, int, str]]) -> None:
    """Each bad request gets its status as a JSON error naming the problem; a good one is answered after them."""
    for body, status, message in requests:
        got_status, headers, answer = target.request("POST", "/translate", body, {"Content-Type": "application/json"})
        assert (got_status, headers["content-type"]) == (status, "application/json"), body[:60]
        assert message in answer["error"]
    status, _, answer = target.translate({"text": ["A dog runs."]})
    assert status == 200 and len(answer["translations"]) == 1 and target.process.poll() is None


def test_bad_requests_get_their_4xx_and_leave_the_service_working(server: Server) -> None:
    check_bad_requests_are_answered(server, BAD_REQUESTS)
    chunks = [b'{"text": ["', b"A dog. " * 1200, b'"]}']  # no Content-Length: counted as it arrives
    status, _, answer = server.request("POST", "/translate", iter(chunks), chunked=True)
    assert status == 413 and "--max-bytes" in answer["error"]
    assert server.request("GET", "/translate")[0] == 405 and server.request("GET", "/nowhere")[0] == 404
    assert server.translate({"text": ["A dog runs."]})[0] == 200


def test_over_long_line_is_cut_unless_nbest_then_truncated_with_a_warning_or_refused_when_strict(
    server: Server, busy_server: Server
) -> None:
    long_line = "a " * 1100  # over the tiny model's 1,023 source tokens, within --max-bytes
    status, _, answer = server.translate({"text": ["A dog.", long_line], "beam": 1})  # split: cut into pieces
    assert status == 200 and "warnings" not in answer and len(answer["sentences"][1]) > 1
    assert "".join(s["source"] for s in answer["sentences"][1]).count("a") == 1100
    status, _, answer = server.translate({"text": ["A dog.", long_line], "beam": 1, "split_sentences": False})
    assert status == 200 and "warnings" not in answer and len(answer["sentences"][1]) > 1  # one segment, cut too
    whole = {"text": ["A dog.", long_line], "beam": 2, "nbest": 2}  # n-best rows are of the line as it is
    status, _, answer = server.translate(whole)
    assert status == 200 and len(answer["translations"]) == 2
    assert (
        len(answer["warnings"]) == 1
        and answer["warnings"][0].startswith("line 2: ")
        and "truncated" in answer["warnings"][0]
    )
    assert "warnings" not in server.translate({"text": ["A dog."]})[2]
    status, _, answer = busy_server.translate(whole)  # --strict
    assert status == 413 and "line 2: " in answer["error"] and "--strict" in answer["error"]


def test_full_queue_is_503_with_retry_after(busy_server: Server) -> None:
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(busy_server.translate, {"text": ["A man is sleeping."]})
        wait_for(lambda: busy_server.pending() == 1)  # admitted; the worker holds it 2 s for company
        status, headers, answer = busy_server.translate({"text": ["A dog runs."]})
        assert status == 503 and int(headers["retry-after"]) >= 1 and "--queue-size" in answer["error"]
        status, _, answer = first.result(timeout=REQUEST_TIMEOUT_S)
    assert status == 200 and len(answer["translations"]) == 1


@pytest.mark.slow
def test_sigterm_finishes_the_request_in_flight_and_exits_0(tiny_run: Path, tmp_path: Path) -> None:
    check_sigterm_drains(Server(tiny_run, tmp_path / "stderr.log", *DRAIN_OPTIONS))


DRAIN_OPTIONS = ("--max-delay-ms", "3000", "--max-batch-tokens", "100000")  # a request waits 3 s for company


def check_sigterm_drains(target: Server) -> None:
    """SIGTERM while a request waits for its batch: no new connections, the request answered, exit 0."""
    try:
        with ThreadPoolExecutor(1) as pool:
            in_flight = pool.submit(target.translate, {"text": ["A man is sleeping.", "Two dogs play."]})
            wait_for(lambda: target.pending() == 1)
            target.process.send_signal(signal.SIGTERM)
            wait_for(lambda: not accepts_connections(target.port), timeout=10)  # stops accepting at once ...
            assert not in_flight.done()  # ... while the admitted request still waits for its batch
            status, _, answer = in_flight.result(timeout=REQUEST_TIMEOUT_S)
        assert status == 200 and len(answer["translations"]) == 2
        assert target.process.wait(timeout=60) == 0
        assert "stopped: every request answered" in target.log.read_text()
    finally:
        target.stop()


def stall(port: int, body: bytes = b'{"text": ["A dog') -> socket.socket:
    """A raw client that sends its headers and part of a 100-byte body, then nothing more."""
    client = socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S)
    client.sendall(
        b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n" + body
    )
    return client


def read_until_closed(client: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a timeout fails the test)."""
    received = b""
    while chunk := client.recv(65536):
        received += chunk
    return received


def test_stalled_body_gets_408_and_the_connection_is_closed(server: Server) -> None:
    start = time.monotonic()
    with stall(server.port) as client:
        answer = read_until_closed(client)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ") and b"connection: close" in head.lower()
    assert "--body-timeout" in json.loads(body)["error"]
    assert 2 <= time.monotonic() - start < 2 + 10  # --body-timeout 2 in the fixture
    assert server.translate({"text": ["A dog runs."]})[0] == 200


def test_headers_that_stall_are_closed_after_the_body_timeout(server: Server) -> None:
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=REQUEST_TIMEOUT_S) as client:
        client.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Le")
        assert read_until_closed(client) == b""
    assert 2 <= time.monotonic() - start < 2 + 10  # --body-timeout 2 in the fixture
    assert server.translate({"text": ["A dog runs."]})[0] == 200


def test_client_gone_mid_body_is_one_log_line(server: Server) -> None:
    part = b'{"text": ["A cat'
    with stall(server.port, part):
        time.sleep(0.2)
    wait_for(lambda: f"closed the connection after {len(part)} body bytes" in server.log.read_text())
    log = server.log.read_text()
    assert "Traceback" not in log and "ClientDisconnect" not in log
    assert server.translate({"text": ["A dog runs."]})[0] == 200


@pytest.mark.slow
def test_sigterm_with_a_stalled_client_exits_0_after_the_grace(tiny_run: Path, tmp_path: Path) -> None:
    """A client stalled mid-body delays the stop by --grace-seconds at most; an idle one, or one stalled in its
    headers, not at all."""
    target = Server(tiny_run, tmp_path / "stderr.log", "--body-timeout", "600", "--grace-seconds", "2")
    try:
        idle = socket.create_connection(("127.0.0.1", target.port), timeout=REQUEST_TIMEOUT_S)
        in_headers = socket.create_connection(("127.0.0.1", target.port), timeout=REQUEST_TIMEOUT_S)
        in_headers.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Le")
        stalled = stall(target.port)
        time.sleep(0.5)  # the stalled request's handler is waiting for its body
        start = time.monotonic()
        target.process.send_signal(signal.SIGTERM)
        assert target.process.wait(timeout=2 + 15) == 0
        assert time.monotonic() - start >= 2 - 0.5  # the stalled client had its grace
        head = read_until_closed(stalled).partition(b"\r\n")[0]
        assert head.startswith(b"HTTP/1.1 503 ") and read_until_closed(idle) == read_until_closed(in_headers) == b""
        log = target.log.read_text()
        assert "Traceback" not in log and "stopped: every request answered" in log
    finally:
        target.stop()


@pytest.mark.slow
def test_sigterm_closes_a_connection_whose_answers_are_never_read(tiny_run: Path, tmp_path: Path) -> None:
    """A client that never reads its answers delays the stop by the bodies' grace, then --grace-seconds for its
    answers at most; its connection is then closed, in one log line, and the server exits 0."""
    target = Server(tiny_run, tmp_path / "stderr.log", "--grace-seconds", "1")
    try:
        never_reads = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        never_reads.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        never_reads.connect(("127.0.0.1", target.port))
        # 1,500 pipelined requests for the page: about 5 MB of answers, more than the loopback's socket buffers
        # (a few MB) take, so the server is left writing to a client that does not read.
        never_reads.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 1500)
        time.sleep(2.0)
        start = time.monotonic()
        target.process.send_signal(signal.SIGTERM)
        assert target.process.wait(timeout=2 * 1 + 15) == 0
        assert time.monotonic() - start >= 2 * 1 - 0.5
        log = target.log.read_text()
        assert "closing 1 connection(s) whose answer was not read within --grace-seconds" in log, log[-2000:]
        assert "Traceback" not in log and "stopped: every request answered" in log
        never_reads.close()
    finally:
        target.stop()


def accepts_connections(port: int) -> bool:
    try:
        http.client.HTTPConnection("127.0.0.1", port, timeout=5).connect()
    except OSError:
        return False
    return True


def test_port_in_use_is_a_one_line_error(server: Server, tiny_run: Path) -> None:
    run = subprocess.run(
        [str(MTKIT), "serve", str(tiny_run), "--port", str(server.port), "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
    )
    assert run.returncode == 2
    assert (
        run.stderr.strip().splitlines()[-1].startswith(f"error: --host 127.0.0.1 --port {server.port}: cannot listen")
    )


def test_device_auto_is_cuda_when_available_else_cpu() -> None:
    import torch

    from mtkit.engines.torch_engine import resolve_torch_device

    assert resolve_torch_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert (resolve_torch_device("cpu"), resolve_torch_device("cuda")) == ("cpu", "cuda")
