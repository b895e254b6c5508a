"""LibreTranslate's document endpoints: POST /translate_file (multipart `file`, `source`, `target`, `api_key`)
answers {"translatedFileUrl": ...}, fetched with GET /download_file/NAME. A document goes through mtkit.documents
(its format's checks: size, zip bombs, entities, ...) and its sentences through the model's worker with every
other request's; translated files live in memory only, under unguessable names, for a bounded time and total size:
no upload or translation ever touches the server's disk or shows one of its paths.
"""

from __future__ import annotations

import asyncio
import email.parser
import email.policy
import mimetypes
import re
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from mtkit.documents.formats import FORMATS, open_job
from mtkit.documents.job import DocumentError
from mtkit.documents.safety import Limits, over_limit
from mtkit.engines.plans import split_options
from mtkit.serve.request import RequestError
from mtkit.serve.router import Router

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class StoredFile:
    filename: str  # what the browser saves it as
    data: bytes
    expires: float


class FileStore:
    """Translated documents by name until they expire (`seconds` after they were made) or, when `max_bytes` would
    be passed, the oldest are dropped first."""

    def __init__(self, max_bytes: int, seconds: float) -> None:
        self.max_bytes, self.seconds = max_bytes, seconds
        self._files: OrderedDict[str, StoredFile] = OrderedDict()

    def put(self, filename: str, data: bytes, now: float) -> str:
        """Keep `data`; its name: an unguessable token, then the file's own name made safe for a URL."""
        self._expire(now)
        if len(data) > self.max_bytes:
            raise RequestError(413, f"the translated file ({len(data)} bytes) is over this server's file store")
        while self._files and sum(len(f.data) for f in self._files.values()) + len(data) > self.max_bytes:
            self._files.popitem(last=False)
        name = f"{secrets.token_urlsafe(24)}.{safe_filename(filename)}"
        self._files[name] = StoredFile(filename, data, now + self.seconds)
        return name

    def get(self, name: str, now: float) -> StoredFile | None:
        self._expire(now)
        return self._files.get(name)

    def _expire(self, now: float) -> None:
        for name in [name for name, stored in self._files.items() if stored.expires <= now]:
            del self._files[name]


def safe_filename(filename: str) -> str:
    """The last part of a client's file name, reduced to letters, digits, dot, dash and underscore."""
    base = PurePosixPath(filename.replace("\\", "/")).name
    return _UNSAFE.sub("_", base).strip("._") or "document"


def translated_filename(filename: str, target: str) -> str:
    """report.docx into German: report.de.docx."""
    path = PurePosixPath(safe_filename(filename))
    return f"{path.stem}.{target}{path.suffix}"


def supported_formats() -> list[str]:
    """/frontend/settings' supportedFilesFormat: the extensions, with their dot, as LibreTranslate lists them."""
    return [f".{extension}" for extension in FORMATS]


def file_upload(body: bytes, content_type: str) -> tuple[dict[str, str], str, bytes]:
    """A multipart/form-data body's text fields, and its `file` part's name and bytes (400 without one)."""
    if not content_type.lower().startswith("multipart/form-data"):
        raise RequestError(400, "Invalid request: send the file as multipart/form-data with a file field")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1", "replace") + b"\r\n\r\n" + body
    )
    if not message.is_multipart():
        raise RequestError(400, "malformed multipart/form-data body (no boundary or no parts)")
    fields: dict[str, str] = {}
    upload: tuple[str, bytes] | None = None
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        if name == "file" and part.get_filename() is not None:
            upload = (str(part.get_filename()), payload)
        elif isinstance(name, str):
            fields.setdefault(name, payload.decode("utf-8", "replace"))
    if upload is None:
        raise RequestError(400, "Invalid request: missing file parameter")
    return fields, *upload


async def translate_file(
    fields: dict[str, str], filename: str, data: bytes, router: Router, limits: Limits, strict: bool
) -> tuple[str, bytes]:
    """The uploaded document translated: (the translated file's name, its bytes). A document mtkit will not take
    is a 400 naming the reason (413 over the size limit)."""
    source, target = fields.get("source", ""), fields.get("target", "")
    if not source or not target:
        raise RequestError(400, f"Invalid request: missing {'source' if not source else 'target'} parameter")
    if source == "auto":
        raise RequestError(400, "Invalid request: source auto is not supported for files; name the language")
    if len(data) > limits.max_bytes:
        raise RequestError(
            413, f"{safe_filename(filename)}: {over_limit(len(data), limits.max_bytes)} (--max-file-bytes)"
        )
    model = router.route(source, target)
    try:
        job = await asyncio.to_thread(open_job, safe_filename(filename), data, source, limits)
    except DocumentError as exc:
        raise RequestError(400, str(exc)) from None
    warnings: list[str] = []
    texts = list(dict.fromkeys(job.texts))
    done = await model.translate_whole(texts, split_options(model.translator, source), strict, warnings, target)
    found = dict(zip(texts, done))
    try:
        document = await asyncio.to_thread(job.finish, [found[text] for text in job.texts])
    except DocumentError as exc:
        raise RequestError(400, str(exc)) from None
    return translated_filename(filename, target), document


def download_response(store: FileStore, name: str) -> Any:
    """GET /download_file/NAME: the file as an attachment, 404 when unknown or expired."""
    from fastapi.responses import Response

    stored = store.get(name, time.monotonic())
    if stored is None:
        raise RequestError(404, "Invalid filename: no such translated file (or it has expired)")
    media_type = mimetypes.guess_type(stored.filename)[0] or "application/octet-stream"
    disposition = f'attachment; filename="{stored.filename}"'
    return Response(stored.data, media_type=media_type, headers={"Content-Disposition": disposition})
