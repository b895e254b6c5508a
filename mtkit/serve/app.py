"""`mtkit serve`: an HTTP translation service over either engine's translator (FastAPI on uvicorn).

build_app puts one translation service (mtkit.serve.service: models, sentences, glossaries, guard, HTML, documents)
behind three APIs side by side: mtkit's own (mtkit_api), LibreTranslate's (libre_api) and DeepL's (deepl_api,
deepl_documents); POST /translate, which mtkit's and LibreTranslate's share, goes to the one its body speaks. Every
error is JSON in its API's shape; /metrics and /ready are for operators. The process around the app is
mtkit.serve.server's. fastapi, the optional extra `mtkit[serve]`, is imported when the app is built; no torch.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations (Request) as objects.
import asyncio
from collections.abc import Callable
from typing import Any

from mtkit import __version__
from mtkit.console import log
from mtkit.documents.safety import Limits
from mtkit.serve import libre_api, mtkit_api
from mtkit.serve.api_keys import KeyLimiter
from mtkit.serve.config import ServeConfig
from mtkit.serve.deepl_api import DeepLApi, add_deepl_routes
from mtkit.serve.deepl_documents import DeepLDocuments, add_document_routes
from mtkit.serve.deepl_glossaries_v3 import V3Glossaries, add_v3_glossary_routes
from mtkit.serve.deepl_memories import DeepLMemories, add_memory_routes
from mtkit.serve.http_body import BodyReader
from mtkit.serve.metrics import CONTENT_TYPE, METRICS_HINT, MetricsMiddleware, current_labels, load_metrics
from mtkit.serve.readiness import Readiness
from mtkit.serve.redis_state import RedisFiles, RedisState
from mtkit.serve.request import ClientGone, RequestError
from mtkit.serve.router import Router
from mtkit.serve.service import Detectors, TranslationService
from mtkit.serve.state import FileStore

RETRY_AFTER_S = 1  # a full queue drains within about one batch; clients retry after this


def build_app(
    router: Router,
    cfg: ServeConfig,
    info: dict[str, Any],
    stopping: asyncio.Event,
    detectors: Detectors,
    limiter: KeyLimiter | None,
    name: Callable[[str], str],
    state: RedisState | None = None,
) -> Any:
    """The FastAPI app: mtkit's API (POST /translate with `text`, GET /, /health, /info), LibreTranslate's (POST
    /translate with `q`, /detect, /languages, /frontend/settings, /translate_file, /download_file/NAME), every error
    {"error": message}; and DeepL's /v2/, its errors {"message": ...}.

    `stopping` is set when the server is asked to stop (see mtkit.serve.server.run_until_stopped); `state`, the
    store replicas share (translated files here, keys' windows in `limiter`, DeepL's StateStore). GET /ready
    (mtkit.serve.readiness, its warm-up started by mtkit.serve.server.serve through app.state.readiness) and
    GET /metrics (mtkit.serve.metrics) are for operators.
    """
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, Response
    from starlette.exceptions import HTTPException

    app = FastAPI(title="mtkit", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)
    service = TranslationService(router, detectors, cfg.strict, Limits(max_bytes=cfg.max_file_bytes))
    reader = BodyReader(cfg, stopping, limiter)
    seconds = cfg.file_minutes * 60
    store = (
        FileStore(cfg.file_store_bytes, seconds) if state is None else RedisFiles(state, cfg.file_store_bytes, seconds)
    )
    metrics = load_metrics()
    if metrics is not None:
        metrics.watch(router)
        app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.state.readiness = readiness = Readiness(router, state.problem if state is not None else None)

    def error(status: int, message: str, close: bool = False, request: Request | None = None) -> JSONResponse:
        headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else {}
        if close:
            headers["Connection"] = "close"
        deepl = request is not None and request.url.path.startswith(("/v2/", "/v3/"))  # DeepL's shape, its SDKs'
        return JSONResponse({"message" if deepl else "error": message}, status_code=status, headers=headers)

    @app.exception_handler(RequestError)
    async def refused(request: Request, exc: RequestError) -> JSONResponse:
        return error(exc.status, str(exc), exc.close, request)

    @app.exception_handler(ClientGone)
    async def gone(request: Request, exc: ClientGone) -> JSONResponse:
        log(str(exc))
        return error(400, str(exc), True, request)  # the server drops it: nobody is listening

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:  # 404, 405 in the same shape
        return error(exc.status_code, str(exc.detail), request=request)

    deepl = DeepLApi(service, cfg, limiter, name, state)  # the store mtkit's API reads memories from too
    v3_glossaries = V3Glossaries(deepl)
    deepl.more_glossaries = v3_glossaries.terms

    @app.post("/translate")
    async def translate(request: Request) -> JSONResponse:  # one path, two APIs: the body says whose
        data, own = await reader.fields(request)
        current_labels().api = "mtkit" if own else "libretranslate"
        if own:
            return JSONResponse(await mtkit_api.translate(data, service, cfg, deepl.memories))
        return JSONResponse(await libre_api.translate(data, service, cfg))

    @app.get("/ready")
    async def ready() -> JSONResponse:  # readiness: a load balancer sends requests only while this is 200
        reason = "draining: the server is stopping" if stopping.is_set() else await readiness.check()
        return JSONResponse(
            {"status": "not ready", "reason": reason} if reason else {"status": "ready"}, 503 if reason else 200
        )

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        if metrics is None:
            raise RequestError(503, METRICS_HINT)
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    mtkit_api.add_mtkit_routes(app, service, info)
    libre_api.add_libre_routes(app, service, cfg, reader, store, metrics, name)
    add_deepl_routes(app, deepl, reader)
    add_document_routes(app, DeepLDocuments(deepl), reader)
    add_v3_glossary_routes(app, v3_glossaries, reader)
    add_memory_routes(app, DeepLMemories(deepl), reader)
    return app
