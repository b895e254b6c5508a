"""mtkit serve's requests: a POST /translate body checked field by field, and the errors a client is answered.

Pure functions of the body's bytes: no HTTP framework, no model.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from mtkit.errors import UserError
from mtkit.text.glossary import TERM_METHODS, Glossary, glossary_from_mapping
from mtkit.text.protect import ProtectConfig
from mtkit.text.sentence_plan import SplitOptions


@dataclass(frozen=True)
class SearchOverrides:
    """What a request may set of its model's search: TranslateConfig fields, applied over the model's own in one
    place (mtkit.serve.worker). Frozen, so hashable: the worker searches the jobs of equal overrides together."""

    beam: int
    nbest: int


# The search fields sit where beam and nbest always stood: the refusal of an unknown field lists them in this order.
REQUEST_KEYS = (
    "text",
    *(f.name for f in dataclasses.fields(SearchOverrides)),
    "prefix",
    "source",
    "target",
    "split_sentences",
    "glossary",
    "protect",
    "term_method",
    "api_key",
)


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


@dataclass
class TranslateRequest:
    lines: list[str]
    search: SearchOverrides
    prefixes: list[str] | None = None  # text each line's translation must begin with ("" for none)
    source: str | None = None  # language codes that pick the model of a server of several
    target: str | None = None
    split: bool = True  # each text translated sentence by sentence (mtkit.text.sentence_plan)
    glossary: Glossary | None = None  # terms the translation takes (mtkit.text.glossary)
    protect: ProtectConfig = dataclasses.field(default_factory=ProtectConfig)  # kept as written besides the defaults
    term_method: str = ""  # how the glossary is applied (mtkit.text.glossary.TERM_METHODS); "": the model's default

    def options(self, base: SplitOptions) -> SplitOptions:
        """The model's split options with this request's glossary, protected patterns and term method."""
        method = self.term_method or base.term_method
        return dataclasses.replace(base, glossary=self.glossary, protect=self.protect, term_method=method)


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


def int_option(data: dict, name: str, default: int, low: int, high: int) -> int:
    """An optional integer field in [low, high]; bools and floats are refused (422)."""
    value = data.get(name, default)
    if type(value) is not int:
        raise RequestError(422, f"{name} must be an integer; got {json.dumps(value)}")
    if not low <= value <= high:
        raise RequestError(422, f"{name} must be between {low} and {high}; got {value}")
    return value


def text_list(data: dict, name: str) -> list[str] | None:
    """An optional field that must be a list of valid Unicode strings (422 / 400 naming it)."""
    lines = data.get(name)
    if lines is None and name not in data:
        return None
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise RequestError(422, f"{name} must be a list of strings")
    for index, line in enumerate(lines):
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:  # JSON's \ud800 escapes decode to lone surrogates, which are not text
            raise RequestError(400, f"{name}[{index}] is not valid Unicode (a lone surrogate)") from None
    return lines


def check_request(data: Any, max_lines: int, max_beam: int, default_beam: int) -> TranslateRequest:
    """parse_request's checks of a decoded body (also "source"/"target" codes and "api_key", checked elsewhere)."""
    if not isinstance(data, dict):
        raise RequestError(422, 'the body must be a JSON object such as {"text": ["A sentence."]}')
    unknown = sorted(set(data) - set(REQUEST_KEYS))
    if unknown:
        raise RequestError(422, f"unknown field {unknown[0]!r}; valid fields: {', '.join(REQUEST_KEYS)}")
    if "text" not in data:
        raise RequestError(422, "text must be a list of strings")
    if len(data["text"] if isinstance(data["text"], list) else ()) > max_lines:  # before looking at each line
        raise RequestError(413, f"{len(data['text'])} lines, over this server's limit of {max_lines} (--max-lines)")
    lines = text_list(data, "text")
    if not lines:
        raise RequestError(422, "text is an empty list; send at least one line")
    prefixes = text_list(data, "prefix")
    if prefixes is not None and len(prefixes) != len(lines):
        raise RequestError(
            422, f'prefix must have one string per line of text ({len(lines)}, "" for none); got {len(prefixes)}'
        )
    beam = int_option(data, "beam", default_beam, 1, max_beam)
    search = SearchOverrides(beam=beam, nbest=int_option(data, "nbest", 1, 1, beam))
    per_line = search.nbest > 1 or prefixes is not None  # n-best lists and prefixes belong to one segment
    split = data.get("split_sentences", not per_line)
    if type(split) is not bool:
        raise RequestError(422, f"split_sentences must be true or false; got {json.dumps(split)}")
    if split and per_line:
        raise RequestError(422, 'nbest and prefix apply to whole lines: send "split_sentences": false with them')
    glossary, protect, method = glossary_field(data, 422), protect_field(data, 422), term_method_field(data, 422)
    return TranslateRequest(lines, search, prefixes, *language_codes(data), split, glossary, protect, method)


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


def protect_field(data: dict, status: int) -> ProtectConfig:
    """The optional "protect": regular expressions whose matches are kept as written, beside the defaults."""
    patterns = data.get("protect") or []
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise RequestError(status, 'protect must be a list of regular expressions, such as ["ACME-\\d+"]')
    try:
        return ProtectConfig(patterns=tuple(patterns))
    except UserError as exc:
        raise RequestError(status, str(exc)) from None


def language_codes(data: dict) -> tuple[str | None, str | None]:
    """The body's "source" and "target" codes, lower-cased (None where absent); not a string is a 422."""
    codes = []
    for name in ("source", "target"):
        code = data.get(name)
        if code is not None and not isinstance(code, str):
            raise RequestError(422, f'{name} must be a language code such as "en"')
        codes.append(code.lower() if code else None)
    return codes[0], codes[1]
