"""mtkit serve's request bodies read within bounds: over --max-bytes refused (413) as soon as known, 408 after
--body-timeout, 503 once the grace after SIGTERM has passed (`BodyReader`, what every API reads with), and POST
/translate's fields (JSON, else a form with the query filling in) with the API key checked. No endpoints and no
model here; starlette, imported when reading, only for its ClientDisconnect.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import parse_qsl

from mtkit.serve.api_keys import KeyLimiter
from mtkit.serve.config import ServeConfig
from mtkit.serve.forms import form_fields
from mtkit.serve.request import ClientGone, RequestError, decode_json, looks_like_json


async def collect_body(request: Any, max_bytes: int, option: str = "--max-bytes") -> bytes:
    """The request body, refused (413) as soon as it is known to be over max_bytes; the refusal names the `option`
    that sets the limit."""
    from starlette.requests import ClientDisconnect

    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise RequestError(
            413, f"request body of {declared} bytes, over this server's limit of {max_bytes} bytes ({option})"
        )
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:  # a chunked body declares no length: count as it comes
                raise RequestError(413, f"request body over this server's limit of {max_bytes} bytes ({option})")
            chunks.append(chunk)
    except ClientDisconnect:
        raise ClientGone(f"{client_address(request)} closed the connection after {size} body bytes") from None
    return b"".join(chunks)


async def after_grace(stopping: asyncio.Event, grace_seconds: float) -> None:
    """Returns `grace_seconds` after the server was asked to stop."""
    await stopping.wait()
    await asyncio.sleep(grace_seconds)


async def read_body(
    request: Any, cfg: ServeConfig, stopping: asyncio.Event, max_bytes: int | None = None, option: str = "--max-bytes"
) -> bytes:
    """The body, bounded in time: 408 after --body-timeout, 503 once the grace after SIGTERM has passed.

    Without a bound, a client that sends headers and part of a body and then stalls holds its connection (and,
    after SIGTERM, the whole process) for as long as it stays connected. Both answers close the connection.
    """
    body = asyncio.ensure_future(collect_body(request, max_bytes or cfg.max_bytes, option))
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


def request_fields(body: bytes, content_type: str, query: str) -> dict[str, Any]:
    """The request's fields: a JSON object's, else the form's, with query parameters filling in (as Flask's
    request.values does for LibreTranslate: deep-translator sends everything in the query of an empty POST)."""
    if looks_like_json(body):
        data = decode_json(body)
        if not isinstance(data, dict):
            raise RequestError(400, "Invalid JSON format: the body must be a JSON object")
        return data
    fields: dict[str, Any] = dict(parse_qsl(query, keep_blank_values=True))
    for name, value in form_fields(body, content_type).items():
        fields.setdefault(name, value)
    return fields


class BodyReader:
    """How every API reads a request: its body within this server's limits (`body`), and POST /translate's and
    /detect's fields with the API key checked (`fields`)."""

    def __init__(self, cfg: ServeConfig, stopping: asyncio.Event, limiter: KeyLimiter | None) -> None:
        self.cfg, self.stopping, self.limiter = cfg, stopping, limiter

    async def body(self, request: Any, max_bytes: int | None = None, option: str = "--max-bytes") -> bytes:
        """read_body with this server's limits (--max-bytes unless `max_bytes`, named by `option`)."""
        return await read_body(request, self.cfg, self.stopping, max_bytes, option)

    def admit(self, key: Any, request: Any) -> None:
        """`key`, else the query's api_key, checked when the server has keys (403 / 429)."""
        if self.limiter is not None:
            self.limiter.admit(key if key is not None else request.query_params.get("api_key"), time.monotonic())

    async def fields(self, request: Any) -> tuple[dict[str, Any], bool]:
        """The request's fields (request_fields) and whether they are mtkit's own body (a JSON
        object with `text` and without LibreTranslate's `q`); then the API key, checked whichever API the request
        speaks. A JSON body that is not an object is LibreTranslate's 400 before any key is looked at."""
        body = await self.body(request)
        data = request_fields(body, request.headers.get("content-type", ""), request.url.query)
        self.admit(data.get("api_key"), request)
        return data, looks_like_json(body) and "text" in data and "q" not in data
