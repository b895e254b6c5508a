"""What every API of mtkit serve shares in reading a request: the errors a client is answered (`RequestError`,
`ClientGone`), JSON bodies decoded strictly, and the checks of the fields two APIs take alike (glossary, term
method), each refusal naming its field. Pure functions: no HTTP framework, no model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mtkit.errors import UserError
from mtkit.text.glossary import TERM_METHODS, Glossary, glossary_from_mapping


class RequestError(Exception):
    """A request the service refuses: HTTP status and a one-line message for the client.

    `close`: the connection is closed after the answer (a body that never came leaves the stream unusable).
    """

    def __init__(self, status: int, message: str, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.close = close


class ClientGone(Exception):
    """The client closed its connection before its request was read; logged in one line, nothing to answer."""


def looks_like_json(body: bytes) -> bool:
    """A body that opens as JSON is read as JSON whatever its Content-Type (curl -d sends form's type)."""
    return body.lstrip()[:1] in (b"{", b"[")


def decode_json(body: bytes) -> Any:
    """The body as JSON; not UTF-8, malformed or absurdly nested is a 400 saying which."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(400, f"request body is not valid UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RequestError(400, f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise RequestError(400, "malformed JSON: nested too deeply") from None


def glossary_field(data: dict, status: int) -> Glossary | None:
    """The optional "glossary": {"source term": "target term", ...} (mtkit.text.glossary's checks; `status` and
    the one-line message naming the field otherwise)."""
    if data.get("glossary") is None:
        return None
    try:
        return glossary_from_mapping(data["glossary"])
    except UserError as exc:
        raise RequestError(status, str(exc)) from None


def term_method_field(data: dict, status: int, prefix: str = "") -> str:
    """The optional "term_method", one of mtkit.text.glossary.TERM_METHODS ("" where absent: the model's default);
    else `status` and a one-line message naming the field, after `prefix`."""
    method = data.get("term_method")
    if method is None or method == "":
        return ""
    if not isinstance(method, str) or method not in TERM_METHODS:
        names = ", ".join(TERM_METHODS)
        raise RequestError(status, f"{prefix}term_method must be one of {names}; got {json.dumps(method)}")
    return method


def check_texts(texts: list[Any], refused: Callable[[int, str], str]) -> None:
    """Each of a request's texts a string of valid Unicode, else a 400 worded by the API's own `refused(index,
    why)`, `why` "a string" (not one) or "valid Unicode" (JSON's \\ud800 escapes decode to lone surrogates)."""
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise RequestError(400, refused(index, "a string"))
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise RequestError(400, refused(index, "valid Unicode")) from None
