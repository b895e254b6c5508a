"""LibreTranslate's HTTP API on mtkit serve: POST /translate with `q` (text or HTML, source "auto" detected), POST
/detect, GET /languages, GET /frontend/settings, and its documents: POST /translate_file (multipart `file`, `source`,
`target`, `api_key`) answers {"translatedFileUrl": ...}, fetched with GET /download_file/NAME. Reads requests
(mtkit.serve.libre_request) and shapes answers; the translating is the service's (mtkit.serve.service). Translated
files live in memory or the replicas' Redis only, under unguessable names, for a bounded time and total size.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations (Request) as objects.

import asyncio
import mimetypes
import time
from collections.abc import Callable
from typing import Any

from mtkit.documents.formats import FORMATS
from mtkit.documents.safety import over_limit
from mtkit.engines.options import TranslateOptions
from mtkit.serve.config import ServeConfig
from mtkit.serve.forms import file_upload
from mtkit.serve.http_body import BodyReader
from mtkit.serve.libre_request import (
    detection,
    frontend_settings,
    parse_translate,
    text_field,
    translate_answer,
    unique_alternatives,
)
from mtkit.serve.metrics import Metrics
from mtkit.serve.redis_state import RedisFiles
from mtkit.serve.request import RequestError
from mtkit.serve.service import TranslationService
from mtkit.serve.state import FileStore, safe_filename, translated_filename


async def translate(fields: dict[str, Any], service: TranslationService, cfg: ServeConfig) -> dict[str, Any]:
    """POST /translate in LibreTranslate's shape; texts of one request may go to several models (source auto)."""
    request = parse_translate(fields, cfg.max_lines, cfg.max_beam - 1)
    detected = None
    if request.source == "auto":
        sources = service.router.sources(request.target)
        if not sources:
            raise RequestError(
                400,
                f"nothing translates into {request.target} here; targets served: "
                f"{', '.join(sorted({t for _, t in service.router.pairs})) or 'none'}",
            )
        found = await service.detectors.best(request.texts, sources)
        languages = [item.language for item in found]
        detected = [detection(item.language, item.confidence) for item in found]
    else:
        service.route(request.source, request.target)  # 400 naming the pairs served
        languages = [request.source] * len(request.texts)
    options = TranslateOptions(glossary=request.glossary, term_method=request.term_method)
    html = request.format == "html"  # as LibreTranslate: no alternatives for HTML
    done = await service.translate_by_source(
        request.texts, languages, request.target, options, request.split, html, request.alternatives + 1
    )
    alternatives = [unique_alternatives(text, others) for text, others in zip(done.texts, done.alternatives)]
    return translate_answer(
        done.texts,
        request,
        detected,
        alternatives if request.alternatives else None,
        done.sentences if not html else None,
    )


async def detect(fields: dict[str, Any], service: TranslationService) -> list[dict[str, Any]]:
    """POST /detect: the candidates for q among every language this server serves, best first."""
    q = fields.get("q")
    text = "\n".join(q) if isinstance(q, list) and all(isinstance(t, str) for t in q) else text_field(fields, "q")
    if not text.strip():
        raise RequestError(400, "Invalid request: missing q parameter")
    found = await asyncio.to_thread(service.detectors.get(service.router.languages()).detect, [text])
    return [detection(item.language, item.confidence) for item in found[0]]


def settings(service: TranslationService, max_bytes: int, keys_required: bool, name: Callable[[str], str]) -> dict:
    """GET /frontend/settings: source "auto", the first model's target; charLimit is --max-bytes; the document
    formats of POST /translate_file, with their dot, as LibreTranslate lists them."""
    target = service.router.pairs[0][1] if service.router.pairs else "en"
    return frontend_settings(
        max_bytes,
        keys_required,
        {"code": "auto", "name": "Auto Detect"},
        {"code": target, "name": name(target)},
        [f".{extension}" for extension in FORMATS],
    )


async def translate_file(
    fields: dict[str, str], filename: str, data: bytes, service: TranslationService
) -> tuple[str, bytes]:
    """The uploaded document translated: (the translated file's name, its bytes). A document mtkit will not take
    is a 400 naming the reason (413 over the size limit)."""
    source, target = fields.get("source", ""), fields.get("target", "")
    if not source or not target:
        raise RequestError(400, f"Invalid request: missing {'source' if not source else 'target'} parameter")
    if source == "auto":
        raise RequestError(400, "Invalid request: source auto is not supported for files; name the language")
    if len(data) > service.limits.max_bytes:
        limit = service.limits.max_bytes
        raise RequestError(413, f"{safe_filename(filename)}: {over_limit(len(data), limit)} (--max-file-bytes)")
    service.route(source, target)  # 400 naming the pairs served, before the document is read
    job = await service.open_document(safe_filename(filename), data, source, target)
    return translated_filename(filename, target), await service.translate_document(job, source, target)


def download_response(store: FileStore | RedisFiles, name: str) -> Any:
    """GET /download_file/NAME: the file as an attachment, 404 when unknown or expired."""
    from fastapi.responses import Response

    stored = store.get(name, time.monotonic())
    if stored is None:
        raise RequestError(404, "Invalid filename: no such translated file (or it has expired)")
    media_type = mimetypes.guess_type(stored.filename)[0] or "application/octet-stream"
    disposition = f'attachment; filename="{stored.filename}"'
    return Response(stored.data, media_type=media_type, headers={"Content-Disposition": disposition})


def add_libre_routes(
    app: Any,
    service: TranslationService,
    cfg: ServeConfig,
    reader: BodyReader,
    store: FileStore | RedisFiles,
    metrics: Metrics | None,
    language_name: Callable[[str], str],
) -> None:
    """LibreTranslate's routes on the FastAPI app but POST /translate, which the app shares with mtkit's API."""
    from fastapi import Request
    from fastapi.responses import JSONResponse

    @app.post("/detect")
    async def libre_detect(request: Request) -> JSONResponse:
        data, _ = await reader.fields(request)
        return JSONResponse(await detect(data, service))

    @app.get("/languages")
    async def languages() -> JSONResponse:  # no key needed: Discourse asks without one
        return JSONResponse(service.router.describe_languages(language_name))

    @app.get("/frontend/settings")
    async def frontend_settings_request() -> JSONResponse:
        return JSONResponse(settings(service, cfg.max_bytes, reader.limiter is not None, language_name))

    @app.post("/translate_file")
    async def translate_file_request(request: Request) -> JSONResponse:
        form = f"--max-file-bytes {cfg.max_file_bytes} and 65536 for the form's own fields"
        body = await reader.body(request, cfg.max_file_bytes + 65536, form)
        fields, filename, data = file_upload(body, request.headers.get("content-type", ""))
        reader.admit(fields.get("api_key"), request)
        saved_as, document = await translate_file(fields, filename, data, service)
        if metrics is not None:
            metrics.files("uploaded", len(data))
            metrics.files("translated", len(document))
        saved = store.put(saved_as, document, time.monotonic())
        return JSONResponse({"translatedFileUrl": f"{str(request.base_url).rstrip('/')}/download_file/{saved}"})

    @app.get("/download_file/{name}")
    async def download_file(name: str) -> Any:
        response = download_response(store, name)
        if metrics is not None:
            metrics.files("downloaded", len(response.body))
        return response
