"""DeepL's document endpoints on mtkit serve: POST /v2/document (multipart `file`, `target_lang`, `source_lang`,
`glossary_id`, `output_format`, `translation_memory_id` and its threshold) answers {"document_id", "document_key"}
and translates in the background; POST /v2/document/{id} with the key answers its status; POST
/v2/document/{id}/result the translated bytes. Every format of mtkit.documents (its checks: size, zip bombs,
entities, ...); status and bytes kept in the StateStore until --file-minutes have passed. No HTTP framework here.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations (Request) as objects.

import asyncio
import html
import mimetypes
import secrets
import time
import traceback
from pathlib import PurePosixPath
from typing import Any

from mtkit.console import log
from mtkit.documents.formats import SAME
from mtkit.documents.job import DocumentError, Job
from mtkit.engines.options import TranslateOptions
from mtkit.serve.deepl_api import DeepLApi, read_body
from mtkit.serve.deepl_request import body_fields, language, memory_fields, string_field
from mtkit.serve.forms import file_upload
from mtkit.serve.http_body import BodyReader
from mtkit.serve.request import RequestError
from mtkit.serve.state import DocumentRecord, owner_of, safe_filename, translated_filename
from mtkit.text.glossary import Glossary

STATUS_WAIT_S = 2.0  # a status request waits this long for a document in progress (clients poll every few seconds)


class DeepLDocuments:
    """Documents uploaded, translated by a background task of this process, their status and bytes in the store."""

    def __init__(self, deepl: DeepLApi) -> None:
        self.deepl = deepl
        self._tasks: dict[str, asyncio.Task] = {}  # document_id -> its translation, while it runs

    async def upload(self, fields: dict[str, str], filename: str, data: bytes, key: str | None) -> dict[str, str]:
        """The document checked (format, size, languages, glossary, quota) and its translation started."""
        target = language(string_field(fields, "target_lang"), "target_lang") if fields.get("target_lang") else ""
        if not target:
            raise RequestError(400, "Value for 'target_lang' not supported.")
        source = language(fields["source_lang"], "source_lang") if fields.get("source_lang") else None
        name = safe_filename(filename)
        check_output_format(name, fields.get("output_format", ""))
        if len(data) > self.deepl.service.limits.max_bytes:
            raise RequestError(413, f"{name}: {len(data)} bytes, over this server's file limit (--max-file-bytes)")
        job, source = await self.opened(name, data, source, target)
        glossary = await self.deepl.glossary_terms(key, fields.get("glossary_id", ""), source, target)
        memory = await self.deepl.memory_options(key, *memory_fields(fields), source, target)
        billed = sum(len(text) for text in job.texts)
        await self.deepl.charge(key, billed)
        record = DocumentRecord(
            secrets.token_hex(16).upper(),
            owner_of(key),
            secrets.token_hex(32).upper(),
            "queued",
            translated_filename(filename, target),
            billed,
            expires=time.time() + self.deepl.cfg.file_minutes * 60,
        )
        await self.deepl.stored("put_document", record)
        task = asyncio.create_task(self.translate(record, job, source, target, glossary, key, memory))
        self._tasks[record.document_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(record.document_id, None))
        return {"document_id": record.document_id, "document_key": record.document_key}

    async def opened(self, name: str, data: bytes, source: str | None, target: str) -> tuple[Job, str]:
        """The document's Job and its source language (given, else detected from its text among the sources
        that translate into the target); a document mtkit will not take is a 400 naming the reason."""
        service = self.deepl.service
        candidates = [source] if source else service.router.sources(target)
        if not candidates:
            raise RequestError(
                400, f"Value for 'target_lang' not supported: nothing translates into {target.upper()} here"
            )
        service.route(candidates[0], target)  # 400 naming the pairs served
        job = await service.open_document(name, data, candidates[0], target)
        if len(candidates) > 1:
            found = await service.detectors.best(["\n".join(job.texts[:200])], candidates)
            if found[0].language != candidates[0]:
                job = await service.open_document(name, data, found[0].language, target)
            return job, found[0].language
        return job, candidates[0]

    async def translate(
        self,
        record: DocumentRecord,
        job: Job,
        source: str,
        target: str,
        glossary: Glossary | None,
        key: str | None,
        memory: TranslateOptions | None = None,
    ) -> None:
        """The background task: the document's sentences through the model's worker, then its bytes stored."""
        record.status = "translating"
        await self.deepl.stored("put_document", record)
        try:
            record.data = await self.deepl.service.translate_document(job, source, target, glossary, memory)
            record.status = "done"
            await self.deepl.stored("add_characters", owner_of(key), record.billed_characters)
        except (RequestError, DocumentError) as exc:
            record.status, record.error_message = "error", str(exc)
        except Exception as exc:  # noqa: BLE001 - a bug: its traceback goes to the log, the client reads "error"
            log(f"document {record.document_id} failed:\n{traceback.format_exc()}")
            record.status, record.error_message = "error", f"translation failed: {type(exc).__name__}"
        await self.deepl.stored("put_document", record)

    async def find(self, document_id: str, fields: dict[str, Any], key: str | None, data: bool) -> DocumentRecord:
        """The key's document, after waiting up to STATUS_WAIT_S for a translation in progress here; 404 when
        unknown, expired or another key's, 403 for a wrong document_key."""
        task = self._tasks.get(document_id)
        if task is not None:
            await asyncio.wait([task], timeout=STATUS_WAIT_S)
        record = await self.deepl.stored("document", document_id, data)
        if record is None or record.owner != owner_of(key):
            raise RequestError(404, "Document not found")
        if not secrets.compare_digest(string_field(fields, "document_key"), record.document_key):
            raise RequestError(403, "Invalid document_key")
        return record


def check_output_format(name: str, output_format: str) -> None:
    """output_format: mtkit writes a document in its own format only (no conversion), so only that one is taken."""
    extension = PurePosixPath(name).suffix.lower().lstrip(".")
    if output_format and SAME.get(output_format.lower(), output_format.lower()) != SAME.get(extension, extension):
        raise RequestError(
            400, f"Value for 'output_format' not supported: mtkit translates .{extension} into .{extension} only"
        )


def status_answer(record: DocumentRecord) -> dict[str, Any]:
    answer: dict[str, Any] = {"document_id": record.document_id, "status": record.status}
    if record.status in ("queued", "translating"):
        answer["seconds_remaining"] = 1
    if record.status == "done":
        answer["billed_characters"] = record.billed_characters
    if record.status == "error":
        answer["error_message"] = record.error_message
    return answer


def add_document_routes(app: Any, documents: DeepLDocuments, reader: BodyReader) -> None:
    """POST /v2/document, /v2/document/{id} and /v2/document/{id}/result on the FastAPI app."""
    from fastapi import Request
    from fastapi.responses import JSONResponse, Response

    deepl = documents.deepl

    @app.post("/v2/document")
    async def deepl_document(request: Request) -> JSONResponse:
        body = await read_body(reader, request, deepl.cfg.max_file_bytes + 65536)  # the form's own fields too
        fields, filename, data = file_upload(body, request.headers.get("content-type", ""))
        key = deepl.admit(request.headers, fields)
        return JSONResponse(await documents.upload(fields, filename, data, key))

    async def found(request: Request, document_id: str, data: bool) -> DocumentRecord:
        body = await read_body(reader, request)
        fields = body_fields(body, request.headers.get("content-type", ""), request.url.query)
        return await documents.find(document_id, fields, deepl.admit(request.headers, fields), data)

    @app.post("/v2/document/{document_id}")
    async def deepl_document_status(document_id: str, request: Request) -> JSONResponse:
        return JSONResponse(status_answer(await found(request, document_id, False)))

    @app.post("/v2/document/{document_id}/result")
    async def deepl_document_result(document_id: str, request: Request) -> Response:
        record = await found(request, document_id, True)
        if record.status == "error":
            raise RequestError(400, f"Document translation failed: {record.error_message}")
        if record.status != "done":
            raise RequestError(503, "Document not ready")
        media_type = mimetypes.guess_type(record.filename)[0] or "application/octet-stream"
        disposition = f'attachment; filename="{html.escape(record.filename)}"'
        return Response(record.data, media_type=media_type, headers={"Content-Disposition": disposition})
