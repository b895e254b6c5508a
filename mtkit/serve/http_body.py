"""mtkit serve's request bodies read within bounds: over --max-bytes refused (413) as soon as known, 408 after
--body-timeout, 503 once the grace after SIGTERM has passed; and a body's fields (mtkit's JSON or LibreTranslate's
shapes) with the API key checked. No endpoints and no model here; starlette, imported when reading, only for its
ClientDisconnect.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from mtkit.serve.api_keys import KeyLimiter
from mtkit.serve.config import ServeConfig
from mtkit.serve.libre_request import looks_like_json, request_fields
from mtkit.serve.request import ClientGone, RequestError, decode_json


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


async def read_fields(
    request: Any,
    cfg: ServeConfig,
    stopping: asyncio.Event,
    limiter: KeyLimiter | None,
) -> tuple[dict[str, Any], bool]:
    """The request's fields and whether they are mtkit's own body (a JSON object with `text` and without
    LibreTranslate's `q`); then the API key, checked when the server has keys (403 / 429), whichever API the request
    speaks. A JSON body that is not an object is LibreTranslate's 400 before any key is looked at."""
    body = await read_body(request, cfg, stopping)
    if looks_like_json(body):
        data = decode_json(body)
        if not isinstance(data, dict):
            raise RequestError(400, "Invalid JSON format: the body must be a JSON object")
        own = "text" in data and "q" not in data
    else:
        data, own = request_fields(body, request.headers.get("content-type", ""), request.url.query), False
    if limiter is not None:
        key = data.get("api_key")
        limiter.admit(key if key is not None else request.query_params.get("api_key"), time.monotonic())
    return data, own
