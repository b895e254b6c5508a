"""Two `mtkit serve` replicas of one run behind Debian's nginx (recipes/deploy/nginx.conf as written, only its ports
and files changed) sharing state in Debian's redis-server, all on 127.0.0.1 and started here; skipped at once,
naming what is missing, where nginx or redis-server is not installed (.ci/run installs both).

Shown: 8 clients for LOAD_S seconds through nginx with one replica killed -9 half-way, every request answered 200
with its translation (half of them through DeepL's API, their characters counted in Redis once each); the replica
restarted and ready within RESTART_S; a document uploaded through nginx and downloaded from either replica; a key
of 60 requests a minute refused its 61st across both; a DeepL glossary made through one replica translating
through the other; the store stopped: translation answers, what needs the store is a 503 naming it, and all
recovers once it is back.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.serve.outside_services import INSTALL, NGINX, REDIS, Nginx, Redis, free_port
from tests.serve.test_app import REQUEST_TIMEOUT_S, Server

MISSING = [name for name, found in (("redis-server", REDIS), ("nginx", NGINX)) if found is None]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(MISSING), reason=f"{', '.join(MISSING)} not installed: {INSTALL}"),
]
pytest.importorskip("redis", reason="redis (redis-py) is not installed: pip install -e '.[serve]'")

# 8 clients for 20 s, not the 60 s of issue 53: the whole suite stays within its 10 minutes on 2 cores, and a kill
# in the middle of 20 s of load already lands on requests in flight (about 10 answered per second here).
CLIENTS = 8
LOAD_S = 20.0
RESTART_S = 90.0  # a killed replica, started again, answers GET /ready 200 within this (torch import, load, warm-up)
OPEN_KEY, LIMITED_KEY, USAGE_KEY = "open-key", "limited-key", "usage-key"
LIMIT = 60


def request(port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    """(status, body bytes) of one request on a fresh connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def translate(port: int, lines: list[str], key: str = OPEN_KEY) -> tuple[int, dict]:
    body = json.dumps({"text": lines, "api_key": key}).encode()
    status, answer = request(port, "POST", "/translate", body, {"Content-Type": "application/json"})
    return status, json.loads(answer)


def upload(port: int, text: str, key: str = OPEN_KEY) -> tuple[int, dict]:
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        for name, value in (("source", "en"), ("target", "de"), ("api_key", key))
    ]
    file_part = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="notes.txt"\r\n'
        f"Content-Type: text/plain\r\n\r\n{text}\r\n--{boundary}--\r\n"
    )
    body = ("".join(parts) + file_part).encode()
    status, answer = request(
        port, "POST", "/translate_file", body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    )
    return status, json.loads(answer)


class Replica:
    """`mtkit serve` on a fixed port, so that nginx's upstream names it and a restart takes the same place."""

    def __init__(self, run: Path, root: Path, port: int, redis_url: str, keys: Path) -> None:
        self.run, self.root, self.port, self.redis_url, self.keys = run, root, port, redis_url, keys
        self.starts = 0
        self.server = self.start()

    def start(self) -> Server:
        self.starts += 1
        options = ("--port", str(self.port), "--state", self.redis_url, "--api-keys", str(self.keys))
        options += ("--max-delay-ms", "2", "--threads", "1")
        self.server = Server(self.run, self.root / f"replica-{self.port}-{self.starts}.log", *options)
        return self.server

    def ready(self) -> bool:
        try:
            return request(self.port, "GET", "/ready")[0] == 200
        except OSError:
            return False

    def wait_ready(self, timeout: float) -> float:
        started = time.monotonic()
        while not self.ready():
            assert time.monotonic() - started < timeout, request(self.port, "GET", "/ready")
            time.sleep(0.05)
        return time.monotonic() - started


@pytest.fixture(scope="module")
def cluster(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("replicas")
    keys = root / "keys.txt"
    keys.write_text(f"{OPEN_KEY}\n{LIMITED_KEY} {LIMIT}\n{USAGE_KEY}\n", encoding="utf-8")
    redis = Redis(root)
    replicas: list[Replica] = []
    nginx = None
    try:
        for _ in range(2):
            replicas.append(Replica(tiny_run, root, free_port(), redis.url, keys))
        for replica in replicas:
            replica.wait_ready(RESTART_S)
        nginx = Nginx(root, [replica.port for replica in replicas])
        yield redis, replicas, nginx
    finally:
        if nginx is not None:
            nginx.stop()
        for replica in replicas:
            replica.server.stop()
        redis.stop()


def test_a_replica_killed_under_load_loses_no_request(cluster, flickr_lines: list[str]) -> None:
    redis, replicas, nginx = cluster
    """Even clients speak mtkit's API, odd ones DeepL's, whose characters are counted per key in Redis: the count
    is never below the characters answered (nothing lost) and above them only by requests nginx saw cut."""
    lines = [line for line in flickr_lines if line.strip()][:CLIENTS]
    expected = translate(replicas[0].port, lines)[1]["translations"]  # one replica's answer, asked directly
    for index in range(1, CLIENTS, 2):
        expected[index] = deepl_translate(replicas[0].port, lines[index])[1]
    usage_before = deepl(replicas[0].port, "GET", "/v2/usage", key=USAGE_KEY)[1]["character_count"]
    answers: list[list[tuple[int, str]]] = [[] for _ in range(CLIENTS)]
    stop = threading.Event()

    def client(index: int) -> None:
        while not stop.is_set():
            try:
                if index % 2:
                    answers[index].append(deepl_translate(nginx.port, lines[index]))
                    continue
                status, answer = translate(nginx.port, [lines[index]])
                answers[index].append((status, answer.get("translations", [answer.get("error")])[0]))
            except Exception as exc:  # noqa: BLE001 - a lost request is counted, not raised in a thread
                answers[index].append((0, f"{type(exc).__name__}: {exc}"))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    time.sleep(LOAD_S / 2)
    killed = replicas[1]
    killed.server.process.kill()  # kill -9: requests in flight on it are cut
    killed.server.process.wait()
    answered_before_restart = sum(len(a) for a in answers)
    restarted = time.monotonic()
    killed.start()  # returns once the port answers /health
    killed.wait_ready(RESTART_S)
    restart_s = time.monotonic() - restarted
    time.sleep(max(0.0, LOAD_S / 2 - restart_s))
    stop.set()
    for thread in threads:
        thread.join(timeout=REQUEST_TIMEOUT_S)
    total = sum(len(a) for a in answers)
    wrong = [(i, a) for i in range(CLIENTS) for a in answers[i] if a != (200, expected[i])]
    assert not wrong, f"{len(wrong)} of {total} requests not answered 200 with their translation: {wrong[:5]}"
    assert total > answered_before_restart > 0 and restart_s < RESTART_S
    # nginx met the dead replica (a cut request or a refused connection) and sent the request to the other
    retried = [line for line in (nginx.root / "error.log").read_text().splitlines() if "upstream" in line]
    assert retried, "no request met the killed replica"
    answered = sum(len(lines[i]) * len(answers[i]) for i in range(1, CLIENTS, 2))
    counted = deepl(nginx.port, "GET", "/v2/usage", key=USAGE_KEY)[1]["character_count"] - usage_before
    cut = sum("prematurely closed" in line and "/v2/translate" in line for line in retried)
    assert answered <= counted <= answered + cut * max(len(line) for line in lines), (answered, counted, cut)
    print(f"{total} requests from {CLIENTS} clients, all 200 ({len(retried)} retried by nginx on the other replica);")
    print(f"DeepL characters answered {answered}, counted {counted}")
    print(f"the killed replica was ready again {restart_s:.1f} s after its restart began")


def test_a_document_uploaded_through_nginx_downloads_from_either_replica(cluster) -> None:
    redis, replicas, nginx = cluster
    status, answer = upload(nginx.port, "A dog runs in the snow.\n\nTwo men play football.\n")
    assert status == 200, answer
    path = "/download_file/" + answer["translatedFileUrl"].rsplit("/download_file/", 1)[1]
    bodies = {request(port, "GET", path) for port in [nginx.port] * 4 + [r.port for r in replicas]}
    assert len(bodies) == 1 and next(iter(bodies))[0] == 200 and next(iter(bodies))[1].count(b"\n") >= 2


def test_a_keys_limit_holds_across_both_replicas(cluster) -> None:
    redis, replicas, nginx = cluster
    for i in range(LIMIT):
        assert translate(replicas[i % 2].port, ["A dog."], LIMITED_KEY)[0] == 200
    for replica in replicas:
        status, answer = translate(replica.port, ["A dog."], LIMITED_KEY)
        assert status == 429 and answer["error"] == f"Slowdown: {LIMIT} per 1 minute"
    assert translate(nginx.port, ["A dog."], LIMITED_KEY)[0] == 429


def deepl(port: int, method: str, path: str, payload: dict | None = None, key: str = OPEN_KEY) -> tuple[int, dict]:
    headers = {"Authorization": f"DeepL-Auth-Key {key}", "Content-Type": "application/json"}
    status, body = request(port, method, path, json.dumps(payload).encode() if payload else None, headers)
    return status, json.loads(body) if body else {}


def deepl_translate(port: int, line: str) -> tuple[int, str]:
    """(status, the translation or the error) of one line through DeepL's API, its characters counted for USAGE_KEY."""
    status, answer = deepl(
        port, "POST", "/v2/translate", {"text": [line], "source_lang": "EN", "target_lang": "DE"}, USAGE_KEY
    )
    return status, answer["translations"][0]["text"] if status == 200 else answer.get("message", "")


def test_a_glossary_made_through_one_replica_translates_through_the_other(cluster) -> None:
    redis, replicas, nginx = cluster
    glossary = {"name": "pets", "source_lang": "en", "target_lang": "de", "entries": "dog\tHundewelpe"}
    status, made = deepl(replicas[0].port, "POST", "/v2/glossaries", glossary | {"entries_format": "tsv"})
    assert status == 201, made
    ask = {"text": ["A dog runs."], "source_lang": "EN", "target_lang": "DE", "glossary_id": made["glossary_id"]}
    status, answer = deepl(replicas[1].port, "POST", "/v2/translate", ask)
    assert status == 200 and "Hundewelpe" in answer["translations"][0]["text"], answer
    listed = deepl(replicas[1].port, "GET", "/v2/glossaries")[1]["glossaries"]
    assert made["glossary_id"] in [g["glossary_id"] for g in listed]
    assert deepl(replicas[1].port, "DELETE", f"/v2/glossaries/{made['glossary_id']}")[0] == 204
    assert deepl(replicas[0].port, "POST", "/v2/translate", ask)[0] == 404


def test_the_store_away_then_back(cluster) -> None:
    redis, replicas, nginx = cluster
    assert translate(nginx.port, ["A dog runs."])[0] == 200
    redis.stop()
    try:
        for replica in replicas:
            assert translate(replica.port, ["A dog runs."])[0] == 200  # a key without a limit needs no state
            status, answer = translate(replica.port, ["A dog runs."], LIMITED_KEY)
            assert status == 503 and "shared state store" in answer["error"] and redis.url in answer["error"]
            status, answer = upload(replica.port, "A cat sleeps.\n")
            assert status == 503 and "does not answer" in answer["error"]
            status, answer = deepl(replica.port, "GET", "/v2/glossaries")
            assert status == 503 and "does not answer" in answer["message"]
            status, body = request(replica.port, "GET", "/ready")
            assert status == 503 and json.loads(body)["reason"].startswith("state store: ")
            assert request(replica.port, "GET", "/health")[0] == 200  # alive all the same
    finally:
        redis.start()
    for replica in replicas:
        replica.wait_ready(10)
        assert translate(replica.port, ["A dog runs."], LIMITED_KEY)[0] == 200  # a new store: a new window
    status, answer = upload(nginx.port, "A cat sleeps.\n")
    assert (
        status == 200
        and request(nginx.port, "GET", "/download_file/" + answer["translatedFileUrl"].rsplit("/", 1)[1])[0] == 200
    )
