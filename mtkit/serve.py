"""`mtkit serve`: an HTTP translation service over either engine's translator (FastAPI on uvicorn).

One worker thread owns the model: it collects queued requests up to a token budget or a delay, decodes
them together and answers each. Every bad input is a 4xx JSON error; a full queue is a 503 with Retry-After.
No training code here; fastapi and uvicorn are the optional extra `mtkit[serve]`, imported when serving.
Imports no torch: the torch engine brings it when it is loaded, --engine ctranslate2 never does.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations (Request) as objects.
import asyncio
import dataclasses
import signal
import socket
from pathlib import Path
from typing import Any, Callable

from mtkit import __version__
from mtkit.console import log
from mtkit.decoding import Hypothesis
from mtkit.engine import Translating, encode_prefixes
from mtkit.engines import load_translator
from mtkit.errors import UserError
from mtkit.serve_config import CLI_DEFAULTS, ServeConfig
from mtkit.serve_request import ClientGone, RequestError, parse_request
from mtkit.serve_worker import BatchWorker, Job
from mtkit.stream import best_lines, scored_texts

INSTALL_HINT = "FastAPI/uvicorn are not installed: pip install -e '.[serve]'"
RETRY_AFTER_S = 1  # a full queue drains within about one batch; clients retry after this
# GET /: a page to try the model in a browser; one file, no outside assets (the service may run offline).
PAGE = (Path(__file__).parent / "static" / "index.html").read_text(encoding="utf-8")


def format_translations(translator: Translating, results: list[list[Hypothesis]], nbest: int) -> list[Any]:
    """nbest 1: one string per line; else a list per line of up to nbest {"text", "score"}, best first."""
    if nbest == 1:
        return best_lines(translator.tokenizer, results)
    return [[{"text": text, "score": score} for text, score in scored_texts(translator.tokenizer, hyps)]
            for hyps in results]


def model_info(translator: Translating, cfg: ServeConfig) -> dict[str, Any]:
    """GET /info: the model, its languages, sizes and recipe, and this server's settings and limits."""
    manifest = translator.info.get("manifest", {})
    configs = translator.info.get("configs", {})
    facts = translator.describe()
    return {
        "mtkit": __version__,
        "checkpoint": translator.info.get("checkpoint"),
        "source_lang": manifest.get("source_lang"),
        "target_lang": manifest.get("target_lang"),
        "vocab_size": translator.tokenizer.vocab_size,
        "model": {"arch": facts["arch"], "parameters": facts["parameters"], **configs.get("model", {})},
        "translate": dataclasses.asdict(translator.cfg),
        "recipe": configs,
        "engine": cfg.engine,
        "device": str(translator.device),
        "dtype": facts["dtype"],
        "workers": translator.workers,
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


def encode_prefix_lines(translator: Translating, prefixes: list[str] | None) -> list[list[int]] | None:
    """Target ids of each line's prefix; one longer than the model's positions is refused (422 naming it)."""
    ids = encode_prefixes(translator.tokenizer, prefixes)
    for index, tokens in enumerate(ids or []):
        if len(tokens) > translator.max_source_tokens:
            raise RequestError(422, f"prefix[{index}]: {len(tokens)} tokens, over the model's {translator.max_source_tokens}")
    return ids


async def translate_request(
    request: Any, translator: Translating, worker: BatchWorker, cfg: ServeConfig, stopping: asyncio.Event,
) -> dict:
    """POST /translate: validate, encode (warnings collected for this request), queue, await the worker."""
    parsed = parse_request(await read_body(request, cfg, stopping), cfg.max_lines, cfg.max_beam, translator.cfg.beam)
    warnings: list[str] = []
    try:
        ids = translator.encode_lines(parsed.lines, strict=cfg.strict, on_warning=warnings.append)
    except UserError as exc:
        raise RequestError(413, str(exc)) from None
    job = Job(ids, parsed.beam, parsed.nbest, prefixes=encode_prefix_lines(translator, parsed.prefixes))
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
    translator: Translating, worker: BatchWorker, cfg: ServeConfig, info: dict[str, Any], stopping: asyncio.Event,
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


def headers_within(seconds: float) -> Callable[..., Any]:
    """uvicorn's HTTP/1.1 connections, each closed if its first request's headers have not arrived in `seconds`.

    uvicorn bounds neither a new connection's wait for its request nor headers that stop half-way (a client
    can hold a connection open that way for as long as it likes); read_body bounds the body once they are in.
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    def close_if_no_request(protocol: Any) -> None:
        if protocol.cycle is None and not protocol.transport.is_closing():  # cycle: made when the headers are in
            protocol.transport.close()

    def connection(**kwargs: Any) -> Any:
        protocol = H11Protocol(**kwargs)
        asyncio.get_running_loop().call_later(seconds, close_if_no_request, protocol)
        return protocol

    return connection


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


async def run_until_stopped(
    server: Any, sock: socket.socket, stopping: asyncio.Event, worker: BatchWorker, grace_seconds: float,
) -> None:
    """Run the uvicorn server; set `stopping` once it has been told to exit (SIGTERM, SIGINT).

    uvicorn notices a signal by polling `should_exit` every 0.1 s; this does the same, so request handlers
    still waiting for a body learn of the stop and give it --grace-seconds. uvicorn then waits for every
    connection to close, which a client that never reads its answer would put off for as long as it stays
    connected: once the bodies' grace is over and every admitted request is answered, the connections still
    open get --grace-seconds more to take their answers, and are then closed.
    """
    async def watch() -> None:
        while not server.should_exit:
            await asyncio.sleep(0.1)
        stopping.set()
        await asyncio.sleep(grace_seconds)
        while worker.pending:
            await asyncio.sleep(0.1)
        await asyncio.sleep(grace_seconds)
        unread = list(server.server_state.connections)
        if unread:
            log(f"closing {len(unread)} connection(s) whose answer was not read within --grace-seconds")
            for connection in unread:  # uvicorn's shutdown then goes on as after any closed connection
                connection.transport.abort()

    watcher = asyncio.create_task(watch())
    try:
        await server.serve(sockets=[sock])
    finally:
        watcher.cancel()


def load_service_translator(run_dir: str | Path, cfg: ServeConfig) -> Translating:
    """The engine's translator with the CLI's defaults and this server's batch budget, workers and threads."""
    options = dict(CLI_DEFAULTS)
    if cfg.max_batch_tokens:
        options["batch_tokens"] = cfg.max_batch_tokens
    if cfg.workers:
        options["workers"] = cfg.workers
    if cfg.engine == "ctranslate2":
        options["threads"] = cfg.threads  # CTranslate2's intra_threads per batch; workers are its inter_threads
    elif cfg.threads:
        import torch  # the torch engine is loading it anyway

        torch.set_num_threads(cfg.threads)
    return load_translator(run_dir, engine=cfg.engine, device=cfg.device, dtype=cfg.dtype, **options)


def serve(run_dir: str | Path, cfg: ServeConfig) -> None:
    """Load RUN_DIR's model and serve it until SIGTERM or SIGINT, which finish the requests in flight."""
    uvicorn = import_uvicorn()
    translator = load_service_translator(run_dir, cfg)
    cfg = dataclasses.replace(cfg, max_batch_tokens=translator.cfg.batch_tokens)
    info = model_info(translator, cfg)
    sock = bind(cfg.host, cfg.port)
    worker = BatchWorker(translator, cfg.max_batch_tokens, cfg.max_delay_ms, cfg.queue_size)
    stopping = asyncio.Event()
    app = build_app(translator, worker, cfg, info, stopping)
    # No timeout_graceful_shutdown: it would cancel admitted translations too. Stalled bodies are bounded by
    # read_body instead, and uvicorn closes idle connections at once when it stops.
    config = uvicorn.Config(app, log_level="info", access_log=cfg.access_log, timeout_graceful_shutdown=None,
                            http=headers_within(cfg.body_timeout))
    server = uvicorn.Server(config)
    # uvicorn handles SIGTERM while it runs and re-raises it once drained; this handler makes that re-raise a
    # no-op (so we exit 0), and a SIGTERM just before uvicorn took over still stops it at once.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: setattr(server, "should_exit", True))
    worker.start()
    host, port = sock.getsockname()[:2]
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    log(f"serving {translator.info.get('checkpoint')} on http://{address} "
        f"({cfg.engine}, {info['device']}, {info['dtype']}); SIGTERM to stop")
    try:
        asyncio.run(run_until_stopped(server, sock, stopping, worker, cfg.grace_seconds))
    finally:
        worker.stop()
        signal.signal(signal.SIGTERM, previous)
    log("stopped: every request answered")
