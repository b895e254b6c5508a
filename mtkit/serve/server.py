"""`mtkit serve`'s process around the app: the models and language detectors loaded, the socket bound, uvicorn run
until SIGTERM or SIGINT and the requests in flight finished. The routes are mtkit.serve.app's; fastapi and uvicorn,
the optional extra `mtkit[serve]`, are imported when serving. Imports no torch: the torch engine brings it when it is
loaded, --engine ctranslate2 never does.
"""

import asyncio
import copy
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mtkit.console import log
from mtkit.corpus.fuzzy_matches import fuzzy_piece
from mtkit.engines.contract import Translating
from mtkit.engines.factory import load_translator
from mtkit.errors import UserError
from mtkit.search.config import SearchOverrides
from mtkit.serve.api_keys import hide_keys_in_access_log, load_limiter
from mtkit.serve.app import build_app
from mtkit.serve.config import CLI_DEFAULTS, ServeConfig
from mtkit.serve.mtkit_api import model_info
from mtkit.serve.readiness import drain_first
from mtkit.serve.redis_state import RedisState
from mtkit.serve.router import Router, ServedModel, model_pairs, named_runs
from mtkit.serve.service import Detectors
from mtkit.serve.state import is_redis
from mtkit.serve.worker import BatchWorker

INSTALL_HINT = "FastAPI/uvicorn are not installed: pip install -e '.[serve]'"


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
    server: Any,
    sock: socket.socket,
    stopping: asyncio.Event,
    router: Router,
    grace_seconds: float,
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
        while router.pending:
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
    """The engine's translator with the CLI's defaults and this server's batch budget and workers (None: the run's)."""
    search = SearchOverrides(**CLI_DEFAULTS, batch_tokens=cfg.max_batch_tokens, workers=cfg.workers)
    return load_translator(run_dir, cfg.engine, search)


def load_models(run_dirs: list[Path], cfg: ServeConfig) -> Router:
    """Every RUN_DIR's model with its worker (a RUN that is a file lists run directories, one per line)."""
    models = []
    for name, run_dir in named_runs(run_dirs):
        translator = load_service_translator(run_dir, cfg)
        worker = BatchWorker(translator, translator.cfg.batch_tokens, cfg.max_delay_ms, cfg.queue_size)
        models.append(ServedModel(name, translator, worker, model_pairs(translator)))
    return Router(models)


def load_detectors(router: Router) -> tuple[Detectors, Callable[[str], str]]:
    """Language identification for source "auto" and /detect, and language names; without the detector
    installed the server still runs, and those requests are answered 500 with the install hint."""
    try:
        from mtkit.language_id import LanguageDetector, language_name

        detectors = Detectors(LanguageDetector)
        detectors.get(router.languages())  # /detect's, made now: an unknown code fails at start-up, not per request
    except (ImportError, UserError) as exc:
        log(f"language detection disabled: {exc}")
        return Detectors(None, str(exc)), lambda code: code
    return detectors, language_name


def server_info(router: Router, cfg: ServeConfig) -> dict[str, Any]:
    """GET /info: the first model's facts at the top (a server of one model), every model under "models"."""
    models = [
        {"name": model.name, "pairs": [f"{s}->{t}" for s, t in model.pairs], **model_info(model.translator, cfg)}
        for model in router.models
    ]
    return {**models[0], "models": models}


def serve(run_dirs: Path | list[Path], cfg: ServeConfig) -> None:
    """Load the models of RUN_DIRs and serve them until SIGTERM or SIGINT, which finish the requests in flight."""
    uvicorn = import_uvicorn()
    limiter = load_limiter(cfg.api_keys)
    state = RedisState(cfg.state) if cfg.state and is_redis(cfg.state) else None  # else DeepL's SQLite file
    if limiter is not None and state is not None:
        limiter.windows = state  # a key's limit holds across the replicas that share the store
    router = load_models(run_dirs if isinstance(run_dirs, list) else [run_dirs], cfg)
    detectors, name = load_detectors(router)
    info = server_info(router, cfg)
    sock = bind(cfg.host, cfg.port)
    stopping = asyncio.Event()
    app = build_app(router, cfg, info, stopping, detectors, limiter, name, state)
    # No timeout_graceful_shutdown: it would cancel admitted translations too. Stalled bodies are bounded by
    # read_body instead, and uvicorn closes idle connections at once when it stops.
    log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    log_config["handlers"]["access"]["stream"] = "ext://sys.stderr"  # uvicorn's default is stdout: logs go to stderr
    config = uvicorn.Config(
        app,
        log_level="info",
        access_log=cfg.access_log,
        timeout_graceful_shutdown=None,
        http=headers_within(cfg.body_timeout),
        log_config=log_config,
    )
    server = uvicorn.Server(config)
    hide_keys_in_access_log()
    # uvicorn handles SIGTERM while it runs and re-raises it once drained; this handler makes that re-raise a
    # no-op (so we exit 0), and a SIGTERM just before uvicorn took over still stops it at once.
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: setattr(server, "should_exit", True))
    server.handle_exit = drain_first(server.handle_exit, app.state.readiness, cfg.drain_seconds)
    app.state.readiness.prepare_warm_up()  # GET /ready answers 503 until every model has decoded a line
    router.start()
    host, port = sock.getsockname()[:2]
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    for model in router.models:
        pairs = ", ".join(f"{source}->{target}" for source, target in model.pairs) or "no languages named"
        # Said once, here: a request's fuzzy match reaches only a model trained to use it (docs/memories.md).
        trained = fuzzy_piece(model.translator.tokenizer)
        matches = "exact and fuzzy matches used" if trained else "exact matches used, fuzzy ones only reported"
        log(f"serving {model.name}: {model.translator.info.get('checkpoint')} ({pairs}; memories: {matches})")
    log(f"on http://{address} ({cfg.engine.engine}, {info['device']}, {info['dtype']}); SIGTERM to stop")
    try:
        asyncio.run(run_until_stopped(server, sock, stopping, router, cfg.grace_seconds))
    finally:
        router.stop()
        signal.signal(signal.SIGTERM, previous)
    log("stopped: every request answered")
