"""`mtkit serve`: an HTTP translation service over either engine's translator (FastAPI on uvicorn).

One worker thread owns the model: it collects queued requests up to a token budget or a delay, decodes
them together and answers each. Every bad input is a 4xx JSON error; a full queue is a 503 with Retry-After.
build_app registers mtkit's own routes and mounts the LibreTranslate and DeepL ones, /metrics and /ready beside
them; the process around the app (models loaded, socket bound, uvicorn run until stopped) is mtkit.serve.server's.
No training code here; fastapi, the optional extra `mtkit[serve]`, is imported when the app is built.
Imports no torch: the torch engine brings it when it is loaded, --engine ctranslate2 never does.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations (Request) as objects.
import asyncio
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mtkit import __version__
from mtkit.console import log
from mtkit.documents.safety import Limits
from mtkit.engines.contract import Translating, encode_prefixes
from mtkit.engines.output import best_lines, confidence, output_line, scored_texts
from mtkit.engines.plans import split_options
from mtkit.search.config import Hypothesis
from mtkit.serve.api_keys import KeyLimiter
from mtkit.serve.config import ServeConfig
from mtkit.serve.deepl_documents import DeepLDocuments, add_document_routes
from mtkit.serve.deepl_endpoints import DeepLService, add_deepl_routes
from mtkit.serve.http_body import read_body, read_fields
from mtkit.serve.libre_endpoints import Detectors, libre_detect, libre_translate, sentence_fields, settings
from mtkit.serve.metrics import CONTENT_TYPE, METRICS_HINT, MetricsMiddleware, current_labels, load_metrics
from mtkit.serve.readiness import Readiness
from mtkit.serve.redis_state import RedisFiles, RedisState
from mtkit.serve.request import ClientGone, RequestError, check_request, language_codes
from mtkit.serve.router import Router
from mtkit.serve.uploads import FileStore, download_response, file_upload, translate_file
from mtkit.text.line_plan import Line, line_terms, prepare_line, retried_lines
from mtkit.text.sentence_plan import guard_counts, text_logprob

RETRY_AFTER_S = 1  # a full queue drains within about one batch; clients retry after this
# GET /: a page to try the model in a browser; one file, no outside assets (the service may run offline).
PAGE = (Path(__file__).parent / "static" / "index.html").read_text(encoding="utf-8")


def format_translations(
    translator: Translating, results: list[list[Hypothesis]], nbest: int, lines: list[Line] | None = None
) -> list[Any]:
    """nbest 1: one string per line; else a list per line of up to nbest {"text", "score"}, best first. `lines`:
    each text given its line's case and kept spans back (mtkit.text.line_plan.prepare_line)."""
    back = [line.finish for line in lines] if lines else [lambda text: (text, [])] * len(results)
    if nbest == 1:
        return [finish(text)[0] for finish, text in zip(back, best_lines(translator.tokenizer, results))]
    return [
        [{"text": finish(text)[0], "score": score} for text, score in scored_texts(translator.tokenizer, hyps)]
        for finish, hyps in zip(back, results)
    ]


# Recipe fields that hold paths of the machine that trained or serves the model: a client never sees them.
PRIVATE_FIELDS = {
    "preprocess": ("train", "valid", "test", "corpora", "hf_cache_dir", "spm_model"),
    "train": ("init_from", "tensorboard_dir"),
}


def public_recipe(configs: dict[str, Any]) -> dict[str, Any]:
    """The recipe a model was trained with, less the fields that name files (PRIVATE_FIELDS)."""
    return {
        section: {k: v for k, v in values.items() if k not in PRIVATE_FIELDS.get(section, ())}
        if isinstance(values, dict)
        else values
        for section, values in configs.items()
    }


def model_info(translator: Translating, cfg: ServeConfig) -> dict[str, Any]:
    """GET /info: the model, its languages, sizes and recipe, and this server's settings and limits."""
    manifest = translator.info.get("manifest", {})
    configs = translator.info.get("configs", {})
    facts = translator.describe()
    return {
        "mtkit": __version__,
        "checkpoint": Path(translator.info.get("checkpoint") or "").name,  # the file's name: no server path
        "source_lang": manifest.get("source_lang"),
        "target_lang": manifest.get("target_lang"),
        "language_codes": translator.tokenizer.language_codes(),  # a multilingual model's targets ([] for others)
        "vocab_size": translator.tokenizer.vocab_size,
        "model": {"arch": facts["arch"], "parameters": facts["parameters"], **configs.get("model", {})},
        "translate": dataclasses.asdict(translator.cfg),
        "recipe": public_recipe(configs),
        "engine": cfg.engine.engine,
        "shortlist": cfg.engine.shortlist,  # CTranslate2 searches the run's shortlist only (--shortlist)
        "device": str(translator.device),
        "dtype": facts["dtype"],
        "workers": translator.workers,
        "limits": {
            key: getattr(cfg, key)
            for key in ("max_lines", "max_bytes", "max_beam", "queue_size", "max_delay_ms", "strict")
        }
        | {"max_batch_tokens": translator.cfg.batch_tokens, "api_keys": cfg.api_keys is not None},
    }


def encode_prefix_lines(translator: Translating, prefixes: list[str] | None) -> list[list[int]] | None:
    """Target ids of each line's prefix; one longer than the model's positions is refused (422 naming it)."""
    ids = encode_prefixes(translator.tokenizer, prefixes)
    for index, tokens in enumerate(ids or []):
        if len(tokens) > translator.max_source_tokens:
            raise RequestError(
                422, f"prefix[{index}]: {len(tokens)} tokens, over the model's {translator.max_source_tokens}"
            )
    return ids


async def translate_request(data: Any, router: Router, cfg: ServeConfig) -> dict:
    """mtkit's POST /translate: {"text": [...]} checked, encoded (warnings collected), decoded by its model; each
    text sentence by sentence unless "split_sentences" is false (or nbest / prefix ask for whole lines)."""
    model = router.route(*language_codes(data)) if isinstance(data, dict) else router.models[0]
    translator = model.translator
    parsed = check_request(data, cfg.max_lines, cfg.max_beam, translator.cfg.beam)
    warnings: list[str] = []
    answer: dict[str, Any]
    source = parsed.source or (model.pairs[0][0] if model.pairs else None)
    # A line's best alone is guarded as `mtkit translate` guards it (one segment a line), so both answer alike.
    if parsed.split or (parsed.search.nbest == 1 and parsed.prefixes is None):
        options = parsed.options(split_options(translator, source, split=parsed.split))
        done = await model.translate_split(parsed.lines, options, parsed.search, cfg.strict, warnings, parsed.target)
        answer = {
            "translations": [text.text if parsed.split else output_line(text.text).strip() for text in done],
            "sentences": [[sentence_fields(s) for s in text.sentences] for text in done],
            "guard": guard_counts(done),
        }
        if not parsed.split:
            answer["confidences"] = [
                logprob / tokens if tokens else None for logprob, tokens in map(text_logprob, done)
            ]
    else:
        options = parsed.options(split_options(translator, source, split=False))
        lines = [prepare_line(line, options, parsed.prefixes is None) for line in parsed.lines]  # as the CLI's
        prefixes = encode_prefix_lines(translator, parsed.prefixes)
        asked = [line.asked for line in lines]
        results = await model.decode(
            asked, parsed.search, cfg.strict, warnings, prefixes, parsed.target, line_terms(lines)
        )
        while retried := retried_lines(lines, best_lines(translator.tokenizer, results)):
            # a line whose output lacks a glossary term goes again by the glossary's next method
            again = None if prefixes is None else [prefixes[i] for i in retried]
            asked = [line.asked for line in retried.values()]
            terms = line_terms(retried.values())
            more = await model.decode(asked, parsed.search, cfg.strict, warnings, again, parsed.target, terms)
            for i, hyps in zip(retried, more, strict=True):
                lines[i], results[i] = retried[i], hyps
        answer = {"translations": format_translations(translator, results, parsed.search.nbest, lines)}
        if parsed.search.nbest == 1:
            answer["confidences"] = [confidence(hyps[0]) if hyps else None for hyps in results]
    if warnings:
        answer["warnings"] = warnings
    return answer


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
    """The FastAPI app: mtkit's POST /translate, GET /health, GET /info, and LibreTranslate's POST /translate
    (`q`), POST /detect, GET /languages, GET /frontend/settings, POST /translate_file and GET /download_file/NAME;
    every error is {"error": message}; and DeepL's /v2/ (mtkit.serve.deepl_endpoints), its errors {"message": ...}.

    `stopping` is set when the server is asked to stop (see mtkit.serve.server.run_until_stopped); `state`, the
    store replicas share (translated files here, keys' windows in `limiter`, DeepL's StateStore). GET /ready
    (mtkit.serve.readiness, its warm-up started by mtkit.serve.server.serve through app.state.readiness) and
    GET /metrics (mtkit.serve.metrics) are for operators.
    """
    from fastapi import FastAPI, Request
    from fastapi.responses import HTMLResponse, JSONResponse, Response
    from starlette.exceptions import HTTPException

    app = FastAPI(title="mtkit", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)
    limits = Limits(max_bytes=cfg.max_file_bytes)
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
        deepl = request is not None and request.url.path.startswith("/v2/")  # DeepL's shape, which its SDKs read
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

    @app.post("/translate")
    async def translate(request: Request) -> JSONResponse:
        data, own = await read_fields(request, cfg, stopping, limiter)
        current_labels().api = "mtkit" if own else "libretranslate"
        if own:
            return JSONResponse(await translate_request(data, router, cfg))
        return JSONResponse(await libre_translate(data, router, detectors, cfg.max_lines, cfg.max_beam, cfg.strict))

    @app.post("/detect")
    async def detect(request: Request) -> JSONResponse:
        data, _ = await read_fields(request, cfg, stopping, limiter)
        return JSONResponse(await libre_detect(data if isinstance(data, dict) else {}, router, detectors))

    @app.get("/languages")
    async def languages() -> JSONResponse:  # no key needed: Discourse asks without one
        return JSONResponse(router.describe_languages(name))

    @app.get("/frontend/settings")
    async def frontend_settings() -> JSONResponse:
        return JSONResponse(settings(router, cfg.max_bytes, limiter is not None, name))

    @app.post("/translate_file")
    async def translate_file_request(request: Request) -> JSONResponse:
        form = f"--max-file-bytes {cfg.max_file_bytes} and 65536 for the form's own fields"
        body = await read_body(request, cfg, stopping, cfg.max_file_bytes + 65536, form)
        fields, filename, data = file_upload(body, request.headers.get("content-type", ""))
        if limiter is not None:
            limiter.admit(fields.get("api_key", request.query_params.get("api_key")), time.monotonic())
        saved_as, document = await translate_file(fields, filename, data, router, limits, cfg.strict)
        if metrics is not None:
            metrics.files("uploaded", len(data))
            metrics.files("translated", len(document))
        name = store.put(saved_as, document, time.monotonic())
        return JSONResponse({"translatedFileUrl": f"{str(request.base_url).rstrip('/')}/download_file/{name}"})

    @app.get("/download_file/{name}")
    async def download_file(name: str) -> Any:
        response = download_response(store, name)
        if metrics is not None:
            metrics.files("downloaded", len(response.body))
        return response

    @app.get("/")
    @app.post("/")  # Nextcloud's LibreTranslate client tests its connection with a POST /
    async def page() -> HTMLResponse:
        return HTMLResponse(PAGE)

    @app.get("/health")
    async def health() -> JSONResponse:
        status = 200 if router.alive else 503
        return JSONResponse({"status": "ok" if router.alive else "worker stopped", "pending": router.pending}, status)

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

    @app.get("/info")
    async def model_information() -> dict:
        return info

    deepl = DeepLService(router, detectors, cfg, limiter, name, state)

    async def read_deepl(request: Request, max_bytes: int | None) -> bytes:  # glossaries, documents: larger
        return await read_body(request, cfg, stopping, max_bytes, "--max-file-bytes" if max_bytes else "--max-bytes")

    add_deepl_routes(app, deepl, read_deepl)
    add_document_routes(app, DeepLDocuments(deepl, limits), read_deepl)
    return app
