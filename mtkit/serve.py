"""`mtkit serve`: an HTTP translation service over translate.Translator (FastAPI on uvicorn).

One worker thread owns the model: it collects queued requests up to a token budget or a delay, decodes
them together and answers each. Every bad input is a 4xx JSON error; a full queue is a 503 with Retry-After.
No training code here; fastapi and uvicorn are the optional extra `mtkit[serve]`, imported when serving.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations (Request) as objects.
import asyncio
import dataclasses
import json
import queue
import signal
import socket
import threading
import time
import traceback
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtkit import __version__
from mtkit.console import log, warn
from mtkit.errors import UserError, check
from mtkit.model import PRESETS, ModelConfig
from mtkit.translate import DTYPES, Hypothesis, Translator, one_line, resolve_device

INSTALL_HINT = "FastAPI/uvicorn are not installed: pip install 'mtkit[serve]'"
REQUEST_KEYS = ("text", "beam", "nbest")
# What `mtkit translate` passes when run without options, so the service answers as the CLI does.
CLI_DEFAULTS: dict[str, Any] = {"nbest": 1, "sampling": False, "top_k": 0, "top_p": 1.0, "temperature": 1.0}
RETRY_AFTER_S = 1  # a full queue drains within about one batch; clients retry after this
# GET /: a page to try the model in a browser; one file, no outside assets (the service may run offline).
PAGE = (Path(__file__).parent / "static" / "index.html").read_text(encoding="utf-8")


@dataclass
class ServeConfig:
    """How the service listens, what it runs on, and the limits it holds every request to."""

    host: str = "127.0.0.1"  # loopback unless told otherwise
    port: int = 8080
    device: str = "auto"  # auto: cuda when available, else cpu
    dtype: str = "fp32"
    max_batch_tokens: int | None = None  # source tokens decoded together (None: the run's translate.batch_tokens)
    max_delay_ms: float = 5.0  # how long the worker waits for more requests after the first
    max_lines: int = 1000  # lines per request (413 above)
    max_bytes: int = 1 << 20  # request body bytes (413 above)
    max_beam: int = 16  # largest `beam` a request may ask for (422 above)
    queue_size: int = 64  # requests admitted and not yet answered (503 above)
    strict: bool = False  # refuse over-long lines (413) instead of truncating them with a warning
    access_log: bool = False
    body_timeout: float = 10.0  # seconds from the headers to the body's last byte (408 after); 1 MiB at ~100 KB/s
    grace_seconds: float = 5.0  # after SIGTERM, how long a body still arriving may take before it is refused

    def __post_init__(self) -> None:
        check(self.dtype in DTYPES, f"--dtype must be one of {', '.join(DTYPES)}")
        for name in ("max_lines", "max_bytes", "max_beam", "queue_size"):
            check(getattr(self, name) >= 1, f"--{name.replace('_', '-')} must be at least 1")
        check(self.max_batch_tokens is None or self.max_batch_tokens >= 1, "--max-batch-tokens must be at least 1")
        check(self.max_delay_ms >= 0, "--max-delay-ms must be >= 0")
        check(self.body_timeout > 0, "--body-timeout must be > 0")
        check(self.grace_seconds >= 0, "--grace-seconds must be >= 0")
        check(0 <= self.port <= 65535, f"--port {self.port}: not a TCP port")


class RequestError(Exception):
    """A request the service refuses: HTTP status and a one-line message for the client.

    `close`: the connection is closed after the answer (a body that never came leaves the stream unusable).
    """

    def __init__(self, status: int, message: str, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.close = close


class ClientGone(Exception):
    """The client closed its connection before its request was read; logged in one line, nothing to answer."""


@dataclass
class TranslateRequest:
    lines: list[str]
    beam: int
    nbest: int


@dataclass
class Job:
    """One request's source ids on their way through the worker; `future` gets its hypotheses."""

    ids: list[list[int]]
    beam: int
    nbest: int
    future: Future = field(default_factory=Future)

    @property
    def tokens(self) -> int:
        return sum(len(seq) + 1 for seq in self.ids)  # + eos, as the batches count them


def decode_json(body: bytes) -> Any:
    """The body as JSON; not UTF-8, malformed or absurdly nested is a 400 saying which."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(400, f"request body is not valid UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RequestError(400, f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise RequestError(400, "malformed JSON: nested too deeply") from None


def int_option(data: dict, name: str, default: int, low: int, high: int) -> int:
    """An optional integer field in [low, high]; bools and floats are refused (422)."""
    value = data.get(name, default)
    if type(value) is not int:
        raise RequestError(422, f"{name} must be an integer; got {json.dumps(value)}")
    if not low <= value <= high:
        raise RequestError(422, f"{name} must be between {low} and {high}; got {value}")
    return value


def parse_request(body: bytes, cfg: ServeConfig, default_beam: int) -> TranslateRequest:
    """Validate a POST /translate body: {"text": [str, ...], "beam"?: int, "nbest"?: int}."""
    data = decode_json(body)
    if not isinstance(data, dict):
        raise RequestError(422, 'the body must be a JSON object such as {"text": ["A sentence."]}')
    unknown = sorted(set(data) - set(REQUEST_KEYS))
    if unknown:
        raise RequestError(422, f"unknown field {unknown[0]!r}; valid fields: {', '.join(REQUEST_KEYS)}")
    lines = data.get("text")
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise RequestError(422, "text must be a list of strings")
    if not lines:
        raise RequestError(422, "text is an empty list; send at least one line")
    if len(lines) > cfg.max_lines:
        raise RequestError(413, f"{len(lines)} lines, over this server's limit of {cfg.max_lines} (--max-lines)")
    for index, line in enumerate(lines):
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:  # JSON's \ud800 escapes decode to lone surrogates, which are not text
            raise RequestError(400, f"text[{index}] is not valid Unicode (a lone surrogate)") from None
    beam = int_option(data, "beam", default_beam, 1, cfg.max_beam)
    nbest = int_option(data, "nbest", 1, 1, beam)
    return TranslateRequest(lines, beam, nbest)


def group_by_options(jobs: list[Job]) -> list[list[Job]]:
    """Jobs split by (beam, nbest), first-come order kept within and across groups: one search per group."""
    groups: dict[tuple[int, int], list[Job]] = {}
    for job in jobs:
        groups.setdefault((job.beam, job.nbest), []).append(job)
    return list(groups.values())


class BatchWorker:
    """The one thread that runs the model: collect, decode together, answer each job's future."""

    def __init__(self, translator: Translator, max_batch_tokens: int, max_delay_ms: float, queue_size: int) -> None:
        self.translator = translator
        self.max_batch_tokens = max_batch_tokens
        self.max_delay_s = max_delay_ms / 1000
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._slots = threading.BoundedSemaphore(queue_size)  # bounds memory: admitted, unanswered requests
        self._pending = 0
        self._stopped = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="mtkit-serve-worker", daemon=True)

    @property
    def pending(self) -> int:
        """Requests admitted and not yet answered."""
        return self._pending

    @property
    def alive(self) -> bool:
        """Taking work: not stopped, and its thread has not died (jobs submitted before start() wait for it)."""
        return not self._stopped and (self._thread.ident is None or self._thread.is_alive())

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Answer everything queued, then end the thread."""
        self._stopped = True
        self._queue.put(None)
        if self._thread.ident is not None:
            self._thread.join()

    def submit(self, job: Job) -> bool:
        """Queue a job; False (nothing queued) when the queue is full or the worker has stopped."""
        if not self.alive or not self._slots.acquire(blocking=False):
            return False
        with self._lock:
            self._pending += 1
        self._queue.put(job)
        return True

    def _run(self) -> None:
        while (first := self._queue.get()) is not None:
            for group in group_by_options(self._collect(first)):
                self._decode(group)

    def _collect(self, first: Job) -> list[Job]:
        """`first` and whatever arrives until the token budget is reached or the delay has passed."""
        jobs, tokens = [first], first.tokens
        deadline = time.monotonic() + self.max_delay_s
        while tokens < self.max_batch_tokens:
            try:
                job = self._queue.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                break
            if job is None:  # stop() asked: decode what was collected, then end
                self._queue.put(None)
                break
            jobs.append(job)
            tokens += job.tokens
        return jobs

    def _decode(self, jobs: list[Job]) -> None:
        """One search over the jobs' lines (same beam and nbest); each future gets its own lines' hypotheses."""
        jobs = [job for job in jobs if self._claim(job)]
        if not jobs:
            return
        cfg = dataclasses.replace(self.translator.cfg, beam=jobs[0].beam, nbest=jobs[0].nbest)
        translator = dataclasses.replace(self.translator, cfg=cfg)  # shares the model; only options differ
        error: Exception | None = None
        try:
            results = translator.search_ids([seq for job in jobs for seq in job.ids])
        except Exception as exc:  # noqa: BLE001 - a bug or out of memory fails these requests, not the service
            warn(f"translation failed for {len(jobs)} request(s):\n{traceback.format_exc()}")
            error = exc
        start = 0
        for job in jobs:
            if error is None:
                job.future.set_result(results[start : start + len(job.ids)])
            else:
                job.future.set_exception(error)
            start += len(job.ids)
            self._release()

    def _claim(self, job: Job) -> bool:
        """Mark a job running (it can no longer be cancelled); a cancelled one is dropped and its slot freed."""
        if job.future.set_running_or_notify_cancel():
            return True
        self._release()
        return False

    def _release(self) -> None:
        with self._lock:
            self._pending -= 1
        self._slots.release()


def format_translations(translator: Translator, results: list[list[Hypothesis]], nbest: int) -> list[Any]:
    """nbest 1: one string per line; else a list per line of up to nbest {"text", "score"}, best first."""
    decode = translator.tokenizer.decode
    if nbest == 1:
        return [one_line(decode([hyps[0].tokens])[0]) if hyps else "" for hyps in results]
    return [
        [{"text": one_line(text), "score": hyp.score} for text, hyp in zip(decode([h.tokens for h in hyps]), hyps)]
        if hyps else []
        for hyps in results
    ]


def preset_name(model_cfg: ModelConfig) -> str | None:
    """The preset whose sizes the model has (dropout aside), if any."""
    sizes = ("d_model", "n_heads", "d_ff", "encoder_layers", "decoder_layers")
    for name, values in PRESETS.items():
        if all(values[key] == getattr(model_cfg, key) for key in sizes):
            return name
    return None


def model_info(translator: Translator, cfg: ServeConfig) -> dict[str, Any]:
    """GET /info: the model, its languages, sizes and recipe, and this server's settings and limits."""
    manifest = translator.info.get("manifest", {})
    model = translator.decoder.models[0]
    return {
        "mtkit": __version__,
        "checkpoint": translator.info.get("checkpoint"),
        "source_lang": manifest.get("source_lang"),
        "target_lang": manifest.get("target_lang"),
        "vocab_size": translator.tokenizer.vocab_size,
        "model": {"arch": preset_name(translator.model_cfg), "parameters": sum(p.numel() for p in model.parameters()),
                  **dataclasses.asdict(translator.model_cfg)},
        "translate": dataclasses.asdict(translator.cfg),
        "recipe": translator.info.get("configs", {}),
        "engine": "torch",
        "device": str(translator.device),
        "dtype": cfg.dtype,
        "limits": {key: getattr(cfg, key) for key in
                   ("max_lines", "max_bytes", "max_beam", "queue_size", "max_batch_tokens", "max_delay_ms", "strict")},
    }


async def collect_body(request: Any, max_bytes: int) -> bytes:
    """The request body, refused (413) as soon as it is known to be over max_bytes."""
    from starlette.requests import ClientDisconnect

    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise RequestError(413, f"request body of {declared} bytes, over this server's limit of {max_bytes} (--max-bytes)")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:  # a chunked body declares no length: count as it comes
                raise RequestError(413, f"request body over this server's limit of {max_bytes} bytes (--max-bytes)")
            chunks.append(chunk)
    except ClientDisconnect:
        raise ClientGone(f"{client_address(request)} closed the connection after {size} body bytes") from None
    return b"".join(chunks)


async def after_grace(stopping: asyncio.Event, grace_seconds: float) -> None:
    """Returns `grace_seconds` after the server was asked to stop."""
    await stopping.wait()
    await asyncio.sleep(grace_seconds)


async def read_body(request: Any, cfg: ServeConfig, stopping: asyncio.Event) -> bytes:
    """The body, bounded in time: 408 after --body-timeout, 503 once the grace after SIGTERM has passed.

    Without a bound, a client that sends headers and part of a body and then stalls holds its connection (and,
    after SIGTERM, the whole process) for as long as it stays connected. Both answers close the connection.
    """
    body = asyncio.ensure_future(collect_body(request, cfg.max_bytes))
    stop = asyncio.ensure_future(after_grace(stopping, cfg.grace_seconds))
    try:
        done, _ = await asyncio.wait((body, stop), timeout=cfg.body_timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        body.cancel()  # no-op when finished; else stops waiting on the socket
    if body in done:
        return body.result()
    if stop in done:
        raise RequestError(503, "server stopping: the request body did not arrive in time", close=True)
    raise RequestError(408, f"request body not received within {cfg.body_timeout:g} s (--body-timeout)", close=True)


def client_address(request: Any) -> str:
    host, port = request.client if request.client else ("unknown client", "")
    return f"{host}:{port}" if port else host


async def translate_request(
    request: Any, translator: Translator, worker: BatchWorker, cfg: ServeConfig, stopping: asyncio.Event,
) -> dict:
    """POST /translate: validate, encode (warnings collected for this request), queue, await the worker."""
    parsed = parse_request(await read_body(request, cfg, stopping), cfg, translator.cfg.beam)
    warnings: list[str] = []
    try:
        ids = translator.encode_lines(parsed.lines, strict=cfg.strict, on_warning=warnings.append)
    except UserError as exc:
        raise RequestError(413, str(exc)) from None
    job = Job(ids, parsed.beam, parsed.nbest)
    if not worker.submit(job):
        raise RequestError(503, f"server busy: {cfg.queue_size} requests queued (--queue-size); retry later")
    try:
        results = await asyncio.wrap_future(job.future)
    except Exception as exc:  # noqa: BLE001 - the worker logged the traceback
        raise RequestError(500, f"translation failed: {type(exc).__name__}: {exc}") from None
    answer: dict[str, Any] = {"translations": format_translations(translator, results, parsed.nbest)}
    if warnings:
        answer["warnings"] = warnings
    return answer


def build_app(
    translator: Translator, worker: BatchWorker, cfg: ServeConfig, info: dict[str, Any], stopping: asyncio.Event,
) -> Any:
    """The FastAPI app: POST /translate, GET /health, GET /info; every error is {"error": message}.

    `stopping` is set when the server is asked to stop (see run_until_stopped).
    """
    from fastapi import FastAPI, Request
    from fastapi.responses import HTMLResponse, JSONResponse
    from starlette.exceptions import HTTPException

    app = FastAPI(title="mtkit", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)

    def error(status: int, message: str, close: bool = False) -> JSONResponse:
        headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else {}
        if close:
            headers["Connection"] = "close"
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    @app.exception_handler(RequestError)
    async def refused(request: Request, exc: RequestError) -> JSONResponse:
        return error(exc.status, str(exc), exc.close)

    @app.exception_handler(ClientGone)
    async def gone(request: Request, exc: ClientGone) -> JSONResponse:
        log(str(exc))
        return error(400, str(exc), close=True)  # the server drops it: nobody is listening

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:  # 404, 405 in the same shape
        return error(exc.status_code, str(exc.detail))

    @app.post("/translate")
    async def translate(request: Request) -> dict:
        return await translate_request(request, translator, worker, cfg, stopping)

    @app.get("/")
    async def page() -> HTMLResponse:
        return HTMLResponse(PAGE)

    @app.get("/health")
    async def health() -> JSONResponse:
        status = 200 if worker.alive else 503
        return JSONResponse({"status": "ok" if worker.alive else "worker stopped", "pending": worker.pending}, status)

    @app.get("/info")
    async def model_information() -> dict:
        return info

    return app


def import_uvicorn() -> Any:
    """The uvicorn module (FastAPI checked too), or a one-line UserError saying how to install them."""
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    return uvicorn


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, so a taken port or unknown host is a one-line error before serving starts.

    Made with proto IPPROTO_TCP, not socket.create_server's 0: asyncio sets TCP_NODELAY only on connections
    whose proto says TCP, and without it every response waited ~40 ms (Nagle against the client's delayed ACK).
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restart at once after a stop
        sock.bind((host, port))
        sock.listen(1024)
        return sock
    except OSError as exc:
        sock.close()
        raise UserError(f"--host {host} --port {port}: cannot listen ({exc.strerror or exc})") from None


async def run_until_stopped(server: Any, sock: socket.socket, stopping: asyncio.Event) -> None:
    """Run the uvicorn server; set `stopping` once it has been told to exit (SIGTERM, SIGINT).

    uvicorn notices a signal by polling `should_exit` every 0.1 s; this does the same, so request handlers
    still waiting for a body learn of the stop and give it --grace-seconds.
    """
    async def watch() -> None:
        while not server.should_exit:
            await asyncio.sleep(0.1)
        stopping.set()

    watcher = asyncio.create_task(watch())
    try:
        await server.serve(sockets=[sock])
    finally:
        watcher.cancel()


def serve(run_dir: str | Path, cfg: ServeConfig) -> None:
    """Load RUN_DIR's model and serve it until SIGTERM or SIGINT, which finish the requests in flight."""
    uvicorn = import_uvicorn()
    device = resolve_device(cfg.device)
    options = dict(CLI_DEFAULTS, **({"batch_tokens": cfg.max_batch_tokens} if cfg.max_batch_tokens else {}))
    translator = Translator.load(run_dir, device=device, dtype=cfg.dtype, **options)
    cfg = dataclasses.replace(cfg, max_batch_tokens=translator.cfg.batch_tokens)
    sock = bind(cfg.host, cfg.port)
    worker = BatchWorker(translator, cfg.max_batch_tokens, cfg.max_delay_ms, cfg.queue_size)
    stopping = asyncio.Event()
    app = build_app(translator, worker, cfg, model_info(translator, cfg), stopping)
    # No timeout_graceful_shutdown: it would cancel admitted translations too. Stalled bodies are bounded by
    # read_body instead, and uvicorn closes idle connections at once when it stops.
    config = uvicorn.Config(app, log_level="info", access_log=cfg.access_log, timeout_graceful_shutdown=None)
    server = uvicorn.Server(config)
    # uvicorn handles SIGTERM while it runs and re-raises it once drained; this handler makes that re-raise a
    # no-op (so we exit 0), and a SIGTERM just before uvicorn took over still stops it at once.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: setattr(server, "should_exit", True))
    worker.start()
    host, port = sock.getsockname()[:2]
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    log(f"serving {translator.info.get('checkpoint')} on http://{address} ({device}, {cfg.dtype}); SIGTERM to stop")
    try:
        asyncio.run(run_until_stopped(server, sock, stopping))
    finally:
        worker.stop()
        signal.signal(signal.SIGTERM, previous)
    log("stopped: every request answered")
