"""DeepL's /v3/translation_memories on mtkit serve, as DeepL's SDKs call them: list, get, segments in cursor pages,
an import job whose upload URL is this server (the upload answered once the file is imported, so the SDK's first
poll reads done), a job's status, a TMX export, delete; each memory the key's (mtkit.serve.memory_state's store).
Jobs live in this process's memory, for --file-minutes. No HTTP framework here but the routes' registration.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations (Request) as objects.

import asyncio
import base64
import io
import secrets
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mtkit.console import log
from mtkit.errors import UserError
from mtkit.memory.readers import FORMATS, pair_reader
from mtkit.memory.tmx import write_tmx
from mtkit.serve.deepl_api import DeepLApi, read_body, request_fields
from mtkit.serve.deepl_request import string_field
from mtkit.serve.http_body import BodyReader
from mtkit.serve.memory_state import MemoryRecord, MemoryStore, Segment, import_memory
from mtkit.serve.request import RequestError
from mtkit.serve.state import owner_of

MAX_LIST = 25  # DeepL's page_size limit for the list of memories
MAX_SEGMENTS, SEGMENTS = 100, 50  # segments per page: DeepL's limit and default
MAX_JOBS = 1000  # jobs this process holds; the oldest is forgotten first
UPLOAD_WAIT_S = 8.0  # under the SDKs' 10 s request timeout, which would send the file again
MEMORIES_PATH = "/v3/translation_memories"


def stamp(seconds: float) -> str:
    """A time as DeepL writes it (ISO 8601, microseconds, Z), which the SDKs' parse_timestamp reads."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class MemoryJob:
    """An import or export: who asked, the secret its upload or download URL carries, and where it stands."""

    job_id: str
    owner: str
    operation: str  # "import" or "export"
    token: str  # the pre-signed URL's secret: the SDKs send no key to an upload or download URL
    created: float
    expires: float
    status: str = "awaiting_input"  # then "completed" or "failed" (DeepL's names)
    updated: float = 0.0
    file_name: str = ""
    content_type: str = "application/xml"
    content_length: int = 0
    display_name: str = ""
    memory_id: str = ""  # the import's new memory, or the memory exported
    skipped: int = 0
    error: str = ""
    data: bytes = field(default=b"", repr=False)  # the export's TMX


def memory_info(record: MemoryRecord) -> dict[str, Any]:
    """A memory as DeepL's TranslationMemoryInfo reads it."""
    return {
        "translation_memory_id": record.memory_id,
        "name": record.name,
        "source_language": record.source_lang,
        "target_languages": [record.target_lang],
        "segment_count": record.segment_count,
        "creation_time": stamp(record.created),
        "updated_time": stamp(record.updated),
    }


def segment_info(segment: Segment, target_lang: str) -> dict[str, Any]:
    """A segment as DeepL's TranslationMemorySegment reads it: one source, its one target (mtkit's memories are of
    one language pair); a time of 0 (never used) is left out."""
    times = {"creation_time": segment.created, "updated_time": segment.updated, "last_used_time": segment.last_used}
    written = {name: stamp(value) for name, value in times.items() if value}
    target = {"target_segment_id": f"{segment.position}-{target_lang}", "target_language": target_lang}
    target |= {"target_text": segment.target} | written
    return {"source_segment_id": str(segment.position), "source_text": segment.source, "targets": [target]} | written


def job_info(job: MemoryJob, base_url: str) -> dict[str, Any]:
    """A job as DeepL's TranslationMemoryJob reads it: its one result carries the status and what came of it."""
    result: dict[str, Any] = {"status": job.status}
    if job.status == "awaiting_input":
        result["status_metadata"] = {"required_action": "upload the file to the job's upload_url"}
    if job.status == "failed":
        result["error"] = {"message": job.error}
    if job.operation == "import" and job.status == "completed":
        result |= {"translation_memory_id": job.memory_id, "skipped_segment_count": job.skipped}
    if job.operation == "export" and job.status == "completed":
        result |= {"download_url": job_url(base_url, job, "download"), "expires_at": stamp(job.expires)}
    answer: dict[str, Any] = {"job_id": job.job_id, "operation": job.operation, "product": "translation_memory"}
    answer |= {"creation_time": stamp(job.created), "updated_time": stamp(job.updated or job.created)}
    if job.operation == "import":
        answer["parameters"] = {"display_name": job.display_name}
        answer["source_file"] = {"file_name": job.file_name, "content_type": job.content_type,
                                 "content_length": job.content_length}  # fmt: skip
    else:
        answer["parameters"] = {"translation_memory_id": job.memory_id}
    return answer | {"results": [result]}


def job_url(base_url: str, job: MemoryJob, kind: str) -> str:
    """The job's upload or download URL on this server, its token in the query (the SDKs send it no key)."""
    return f"{base_url.rstrip('/')}{MEMORIES_PATH}/jobs/{job.job_id}/{kind}?token={job.token}"


def cursor_after(cursor: str) -> int:
    """The position a page_cursor (ours: the last position sent, base64) names; 400 for one we did not write."""
    if not cursor:
        return -1
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii") + b"==").decode("ascii")
        kind, _, number = text.partition(":")
        if kind == "after" and number.isdigit():
            return int(number)
    except (ValueError, UnicodeError):
        pass
    raise RequestError(400, "Value for 'page_cursor' not supported: pass a next_page_cursor this server sent")


def cursor_of(position: int) -> str:
    return base64.urlsafe_b64encode(f"after:{position}".encode("ascii")).decode("ascii").rstrip("=")


def whole_number(fields: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    """A query's whole number within [low, high]: 400 naming the field otherwise."""
    text = string_field(fields, name, str(default))
    if not text.strip().isdigit() or not low <= int(text) <= high:
        raise RequestError(400, f"Value for '{name}' not supported: a whole number {low}-{high}")
    return int(text)


class DeepLMemories:
    """The endpoints' work over the key's memories in the store, and this process's jobs."""

    def __init__(self, deepl: DeepLApi) -> None:
        self.deepl = deepl
        self._jobs: dict[str, MemoryJob] = {}
        self._tasks: dict[str, asyncio.Task] = {}  # job_id -> its import or export, while it runs

    async def store(self) -> MemoryStore:
        return await self.deepl.memories.memories()

    async def record(self, key: str | None, memory_id: str) -> MemoryRecord:
        """The key's memory (404 for another key's: it does not exist for them)."""
        found = await asyncio.to_thread((await self.store()).memory, owner_of(key), memory_id)
        if found is None:
            raise RequestError(404, "Translation memory not found")
        return found

    async def listed(self, fields: dict[str, Any], key: str | None) -> dict[str, Any]:
        page = whole_number(fields, "page", 0, 0, 10**9)
        size = whole_number(fields, "page_size", MAX_LIST, 1, MAX_LIST)
        records = await asyncio.to_thread((await self.store()).memories, owner_of(key))
        shown = records[page * size : (page + 1) * size]
        return {"translation_memories": [memory_info(record) for record in shown], "total_count": len(records)}

    async def segments(self, memory_id: str, fields: dict[str, Any], key: str | None) -> dict[str, Any]:
        """One page of segments after page_cursor, those holding filter_text (2 characters at least) if given."""
        record = await self.record(key, memory_id)
        size = whole_number(fields, "page_size", SEGMENTS, 1, MAX_SEGMENTS)
        text = string_field(fields, "filter_text")
        if "filter_text" in fields and len(text) < 2:
            raise RequestError(400, "Value for 'filter_text' not supported: at least 2 characters")
        case = string_field(fields, "filter_case_sensitive", "false").lower()
        if case not in ("true", "false"):
            raise RequestError(400, "Value for 'filter_case_sensitive' not supported: true or false")
        after = cursor_after(string_field(fields, "page_cursor"))
        store = await self.store()
        # One more than the page asks for: whether a next page exists, without counting the matches.
        found = await asyncio.to_thread(store.segments, memory_id, after, size + 1, text, case == "true")
        page = found[:size]
        answer = {
            "segments": [segment_info(s, record.target_lang) for s in page],
            "segment_count": record.segment_count,
        }
        if len(found) > size:
            answer["next_page_cursor"] = cursor_of(page[-1].position)
        return answer

    async def delete(self, key: str | None, memory_id: str) -> None:
        if not await asyncio.to_thread((await self.store()).delete, owner_of(key), memory_id):
            raise RequestError(404, "Translation memory not found")

    def new_job(self, key: str | None, operation: str) -> MemoryJob:
        """A job, the expired ones forgotten (an export's bytes are held until then)."""
        now = time.time()
        for old in [job_id for job_id, job in self._jobs.items() if job.expires <= now]:
            del self._jobs[old]
        while len(self._jobs) >= MAX_JOBS:
            del self._jobs[next(iter(self._jobs))]
        seconds = self.deepl.cfg.file_minutes * 60
        job = MemoryJob(str(uuid.uuid4()), owner_of(key), operation, secrets.token_urlsafe(32), now, now + seconds)
        self._jobs[job.job_id] = job
        return job

    def job(self, job_id: str, key: str | None) -> MemoryJob:
        """The key's job (404 for an unknown, expired or another key's)."""
        job = self._jobs.get(job_id)
        if job is None or job.owner != owner_of(key) or job.expires <= time.time():
            raise RequestError(404, "Translation memory job not found")
        return job

    def signed(self, job_id: str, token: str, operation: str) -> MemoryJob:
        """The job an upload or download URL names, its token checked (404 either way: nothing to guess from)."""
        job = self._jobs.get(job_id)
        if job is None or job.operation != operation or not secrets.compare_digest(token, job.token):
            raise RequestError(404, "Translation memory job not found")
        if job.expires <= time.time():
            raise RequestError(404, "Translation memory job expired")
        return job

    def create_import(self, fields: dict[str, Any], key: str | None) -> MemoryJob:
        """POST /v3/translation_memories/import: source_file {file_name, content_length, content_type},
        parameters {display_name}; a file of a format mtkit.memory.readers reads, within --max-file-bytes."""
        source = fields.get("source_file")
        parameters = fields.get("parameters") or {}
        if not isinstance(source, dict) or not isinstance(parameters, dict):
            raise RequestError(400, "Value for 'source_file' not supported: an object with file_name, content_length")
        name = source.get("file_name")
        length = source.get("content_length")
        if not isinstance(name, str) or not name.strip():
            raise RequestError(400, "Value for 'source_file.file_name' not supported: a file name such as legal.tmx")
        # A file that names its languages: TSV names none, and a DeepL import gives them no field.
        if FORMATS.get("." + name.rsplit(".", 1)[-1].lower(), "tsv") == "tsv":
            raise RequestError(400, f"Value for 'source_file.file_name' not supported: {name} is not .tmx, .xlf or .po")
        if type(length) is not int or length <= 0:
            raise RequestError(400, "Value for 'source_file.content_length' not supported: a positive whole number")
        if length > self.deepl.cfg.max_file_bytes:
            raise RequestError(413, f"{name}: {length} bytes, over this server's file limit (--max-file-bytes)")
        display = parameters.get("display_name", name)
        if not isinstance(display, str) or not display.strip():
            raise RequestError(400, "Value for 'parameters.display_name' not supported: a non-empty name")
        job = self.new_job(key, "import")
        job.file_name, job.content_length, job.display_name = name, length, display
        job.content_type = str(source.get("content_type") or "application/xml")
        return job

    async def upload(self, job: MemoryJob, data: bytes) -> None:
        """The uploaded file imported, the upload answered once it is (so the SDK's first poll reads the end) or
        after UPLOAD_WAIT_S, the import going on; a file that cannot be read fails the job (the SDK raises its
        one-line message), as DeepL reports a bad file."""
        if job.status != "awaiting_input":
            raise RequestError(409, "This import job's file was already uploaded")
        if len(data) != job.content_length:
            raise RequestError(400, f"The file has {len(data)} bytes, the job declared {job.content_length}")
        job.status, job.updated = "processing", time.time()
        store = await self.store()

        def imported() -> None:
            reader = pair_reader(io.BytesIO(data), job.file_name)
            record, job.skipped = import_memory(store, reader, job.owner, job.display_name, replace_name=False)
            job.memory_id = record.memory_id

        await self.run(job, imported)

    async def create_export(self, key: str | None, memory_id: str) -> MemoryJob:
        """POST /v3/translation_memories/{id}/export: the TMX written, held with the job (the oldest exports'
        bytes dropped, their jobs expired, past --file-store-bytes)."""
        record = await self.record(key, memory_id)
        store = await self.store()
        job = self.new_job(key, "export")
        job.memory_id, job.status = record.memory_id, "processing"

        def written() -> None:
            stream = io.BytesIO()
            write_tmx(store.pairs(record.memory_id), stream, record.source_lang, record.target_lang)
            job.data = stream.getvalue()

        await self.run(job, written)
        exports = [held for held in self._jobs.values() if held.data]
        while len(exports) > 1 and sum(len(held.data) for held in exports) > self.deepl.cfg.file_store_bytes:
            oldest = exports.pop(0)
            oldest.data, oldest.status = b"", "expired"
        return job

    async def run(self, job: MemoryJob, work: Callable[[], None]) -> None:
        """`work` on a thread as a task of its own, waited for up to UPLOAD_WAIT_S: under the SDKs' request
        timeout, so a big file is not sent again while it is still being read; the job says how it ended."""

        async def finished() -> None:
            try:
                await asyncio.to_thread(work)
                job.status = "completed"
            except UserError as exc:
                job.status, job.error = "failed", str(exc)
            except Exception as exc:  # noqa: BLE001 - a bug: its traceback goes to the log, the client reads "failed"
                log(f"translation memory job {job.job_id} failed:\n{traceback.format_exc()}")
                job.status, job.error = "failed", f"{job.operation} failed: {type(exc).__name__}"
            job.updated = time.time()

        task = asyncio.create_task(finished())
        self._tasks[job.job_id] = task  # held: the event loop keeps only weak references to tasks
        task.add_done_callback(lambda _: self._tasks.pop(job.job_id, None))
        await asyncio.wait([task], timeout=UPLOAD_WAIT_S)


def add_memory_routes(app: Any, memories: DeepLMemories, reader: BodyReader) -> None:
    """/v3/translation_memories and its jobs on the FastAPI app, each request's body read by `reader`."""
    from fastapi import Request
    from fastapi.responses import JSONResponse, Response

    deepl = memories.deepl

    async def fields_of(request: Request) -> tuple[dict[str, Any], str | None]:
        return await request_fields(deepl, reader, request)

    @app.get(MEMORIES_PATH)
    async def deepl_memories(request: Request) -> JSONResponse:
        fields, key = await fields_of(request)
        return JSONResponse(await memories.listed(fields, key))

    @app.post(MEMORIES_PATH + "/import")
    async def deepl_memory_import(request: Request) -> JSONResponse:
        fields, key = await fields_of(request)
        job = memories.create_import(fields, key)
        answer = {"job_id": job.job_id, "upload_url": job_url(str(request.base_url), job, "upload")}
        return JSONResponse(answer | {"expires_at": stamp(job.expires)}, status_code=201)

    @app.put(MEMORIES_PATH + "/jobs/{job_id}/upload")
    async def deepl_memory_upload(job_id: str, request: Request) -> Response:
        job = memories.signed(job_id, request.query_params.get("token", ""), "import")
        await memories.upload(job, await read_body(reader, request, deepl.cfg.max_file_bytes))
        return Response(status_code=200)

    @app.get(MEMORIES_PATH + "/jobs/{job_id}/download")
    async def deepl_memory_download(job_id: str, request: Request) -> Response:
        job = memories.signed(job_id, request.query_params.get("token", ""), "export")
        if job.status != "completed":
            raise RequestError(404, f"Translation memory export {job.status}")
        disposition = f'attachment; filename="{job.memory_id}.tmx"'
        return Response(job.data, media_type="application/x-tmx+xml", headers={"Content-Disposition": disposition})

    @app.get(MEMORIES_PATH + "/jobs/{job_id}")
    async def deepl_memory_job(job_id: str, request: Request) -> JSONResponse:
        _, key = await fields_of(request)
        return JSONResponse(job_info(memories.job(job_id, key), str(request.base_url)))

    @app.get(MEMORIES_PATH + "/{memory_id}")
    async def deepl_memory(memory_id: str, request: Request) -> JSONResponse:
        _, key = await fields_of(request)
        return JSONResponse(memory_info(await memories.record(key, memory_id)))

    @app.get(MEMORIES_PATH + "/{memory_id}/segments")
    async def deepl_memory_segments(memory_id: str, request: Request) -> JSONResponse:
        fields, key = await fields_of(request)
        return JSONResponse(await memories.segments(memory_id, fields, key))

    @app.post(MEMORIES_PATH + "/{memory_id}/export")
    async def deepl_memory_export(memory_id: str, request: Request) -> JSONResponse:
        _, key = await fields_of(request)
        job = await memories.create_export(key, memory_id)
        return JSONResponse(job_info(job, str(request.base_url)), status_code=202)

    @app.delete(MEMORIES_PATH + "/{memory_id}")
    async def deepl_memory_delete(memory_id: str, request: Request) -> Response:
        _, key = await fields_of(request)
        await memories.delete(key, memory_id)
        return Response(status_code=204)
