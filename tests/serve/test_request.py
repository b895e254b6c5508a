"""mtkit serve's request checking (mtkit.serve.mtkit_api, mtkit.serve.request) as pure functions of the body's
bytes: no server process.

Every refusal a client can provoke with a POST /translate body, its status and the words it is told. The
server's side (the status reaches the client as JSON, the service keeps working) is proved once per engine in
tests/serve/test_app.py and tests/serve/test_app_ct2.py.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from mtkit.corpus.term_hints import TERM_PIECES
from mtkit.engines.options import TranslateOptions
from mtkit.search.config import SearchOverrides, TranslateConfig
from mtkit.serve.mtkit_api import TranslateRequest, check_request
from mtkit.serve.request import RequestError, decode_json
from mtkit.text.glossary import Glossary
from mtkit.text.sentence_plan import SplitOptions


def parse_request(body: bytes, max_lines: int, max_beam: int, default_beam: int) -> TranslateRequest:
    """A POST /translate body decoded and checked as the server does it."""
    return check_request(decode_json(body), max_lines, max_beam, default_beam)


MAX_LINES, MAX_BEAM, DEFAULT_BEAM = 16, 16, 4
TOO_DEEP = b"[" * 5000  # json.loads would recurse past Python's limit

BAD_BODIES = [
    (b'{"text": ["A dog."', 400, "malformed JSON"),
    (b"", 400, "malformed JSON"),
    (TOO_DEEP, 400, "nested too deeply"),
    (b'{"text": ["A \xff dog."]}', 400, "not valid UTF-8 (byte 13)"),
    (b'{"text": ["A \\ud800 dog."]}', 400, "text[0] is not valid Unicode (a lone surrogate)"),
    (b'["A dog."]', 422, "JSON object"),
    (b'{"text": "A dog."}', 422, "text must be a list of strings"),
    (b'{"text": ["A dog.", 3]}', 422, "text must be a list of strings"),
    (b'{"text": null}', 422, "text must be a list of strings"),
    (
        b'{"lines": ["A dog."]}',
        422,
        "unknown field 'lines'; valid fields: text, beam, nbest, prefix, source, target, split_sentences, glossary, "
        "protect, term_method, memory, memory_threshold, api_key",
    ),
    (b"{}", 422, "text must be a list of strings"),
    (b'{"text": []}', 422, "empty list"),
    (b'{"text": ["A dog."], "beam": "4"}', 422, 'beam must be an integer; got "4"'),
    (b'{"text": ["A dog."], "beam": true}', 422, "beam must be an integer; got true"),
    (b'{"text": ["A dog."], "beam": 2.0}', 422, "beam must be an integer; got 2.0"),
    (b'{"text": ["A dog."], "beam": 0}', 422, "beam must be between 1 and 16; got 0"),
    (b'{"text": ["A dog."], "beam": 17}', 422, "beam must be between 1 and 16; got 17"),
    (b'{"text": ["A dog."], "nbest": 5}', 422, "nbest must be between 1 and 4; got 5"),  # at most the default beam
    (b'{"text": ["A dog."], "beam": 2, "nbest": 3}', 422, "nbest must be between 1 and 2"),
    (json.dumps({"text": ["A dog."] * 17}).encode(), 413, "17 lines, over this server's limit of 16 (--max-lines)"),
    (json.dumps({"text": [3] * 17}).encode(), 413, "--max-lines"),  # counted before any line is looked at
    (b'{"text": ["A dog.", "A cat."], "prefix": ["Ein"]}', 422, "prefix must have one string per line of text (2"),
    (b'{"text": ["A dog."], "prefix": "Ein"}', 422, "prefix must be a list of strings"),
    (b'{"text": ["A dog."], "split_sentences": 1}', 422, "split_sentences must be true or false; got 1"),
    (b'{"text": ["A dog."], "nbest": 2, "split_sentences": true}', 422, 'send "split_sentences": false'),
    (b'{"text": ["A dog."], "prefix": [null]}', 422, "prefix must be a list of strings"),
    (b'{"text": ["A dog."], "prefix": null}', 422, "prefix must be a list of strings"),
    (b'{"text": ["A dog."], "prefix": ["\\ud800"]}', 400, "prefix[0] is not valid Unicode"),
]


@pytest.mark.parametrize("body, status, message", BAD_BODIES, ids=lambda v: v if isinstance(v, int) else None)
def test_a_bad_body_is_refused_with_its_status_and_reason(body: bytes, status: int, message: str) -> None:
    with pytest.raises(RequestError) as refused:
        parse_request(body, MAX_LINES, MAX_BEAM, DEFAULT_BEAM)
    assert (refused.value.status, refused.value.close) == (status, False)
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)  # one line for the client


def test_a_good_body_keeps_every_line_and_fills_the_defaults() -> None:
    lines = ["A dog.", "", "   ", "Ein Hund läuft. ✓"]
    assert parse_request(json.dumps({"text": lines}).encode(), MAX_LINES, MAX_BEAM, DEFAULT_BEAM) == TranslateRequest(
        lines, TranslateOptions(SearchOverrides(beam=DEFAULT_BEAM, nbest=1)), None
    )
    body = json.dumps({"text": ["A dog.", "A cat."], "beam": 3, "nbest": 3, "prefix": ["Ein", ""]}).encode()
    assert parse_request(body, MAX_LINES, MAX_BEAM, DEFAULT_BEAM) == TranslateRequest(
        ["A dog.", "A cat."], TranslateOptions(SearchOverrides(beam=3, nbest=3)), ["Ein", ""], split=False
    )  # n-best lists and prefixes are of whole lines: not split unless asked, and then refused
    body = json.dumps({"text": ["A dog."], "split_sentences": False}).encode()
    assert not parse_request(body, MAX_LINES, MAX_BEAM, DEFAULT_BEAM).split
    at_limits = json.dumps({"text": ["x"] * MAX_LINES, "beam": MAX_BEAM, "nbest": MAX_BEAM}).encode()
    assert parse_request(at_limits, MAX_LINES, MAX_BEAM, DEFAULT_BEAM).options.search.nbest == MAX_BEAM


def test_a_glossary_and_protected_patterns_are_read_with_422s_naming_the_field() -> None:
    body = json.dumps({"text": ["A red dog."], "glossary": {"red dog": "Rotfuchs"}, "protect": [r"ACME-\d+"]})
    parsed = parse_request(body.encode(), MAX_LINES, MAX_BEAM, DEFAULT_BEAM).options
    assert parsed.glossary == Glossary((("red dog", "Rotfuchs"),)) and parsed.protect.patterns == (r"ACME-\d+",)
    for extra, message in [
        ({"glossary": ["red dog", "Rotfuchs"]}, "glossary must be an object of terms"),
        ({"glossary": {"dog": 1}}, "glossary['dog'] must be a string; got int"),
        ({"protect": "ACME"}, "protect must be a list of regular expressions"),
        ({"protect": ["(unclosed"]}, "protect: bad regular expression '(unclosed'"),
    ]:
        with pytest.raises(RequestError) as refused:
            parse_request(json.dumps({"text": ["A dog."]} | extra).encode(), MAX_LINES, MAX_BEAM, DEFAULT_BEAM)
        assert refused.value.status == 422 and message in str(refused.value)


def test_a_term_method_is_read_with_a_422_naming_the_field() -> None:
    hinted = SplitOptions("en", term_pieces=TERM_PIECES)
    for extra, method, default in [({}, "", "inline"), ({"term_method": "placeholder"}, "placeholder", "placeholder")]:
        body = json.dumps({"text": ["A red dog."], "glossary": {"red dog": "Rotfuchs"}} | extra)
        parsed = parse_request(body.encode(), MAX_LINES, MAX_BEAM, DEFAULT_BEAM).options
        assert parsed.term_method == method  # "": the model's default, which its split options hold
        assert dataclasses.replace(hinted, term_method=parsed.term_method).term_method == default
        assert SplitOptions("en", term_method=parsed.term_method).term_method == (method or "replace")
    for value in ("constrained", 3, ["inline"]):
        with pytest.raises(RequestError) as refused:
            body = json.dumps({"text": ["A dog."], "term_method": value})
            parse_request(body.encode(), MAX_LINES, MAX_BEAM, DEFAULT_BEAM)
        assert refused.value.status == 422
        assert str(refused.value) == (
            "term_method must be one of placeholder, inline, check-first, check-first-inline, guided, replace; "
            f"got {json.dumps(value)}"
        )


def test_json_is_decoded_as_strict_utf8() -> None:
    assert decode_json('{"text": ["Straße"]}'.encode()) == {"text": ["Straße"]}
    with pytest.raises(RequestError, match="byte 0"):
        decode_json("{}".encode("utf-16"))
    with pytest.raises(RequestError, match="Extra data at line 2 column 2"):
        decode_json(b'{"text": []\n}}')


def test_the_search_overrides_are_translate_config_fields() -> None:
    """The worker applies a request's overrides over its model's TranslateConfig by field name; equal overrides are
    one key, so the worker searches their jobs together."""
    overrides = SearchOverrides(beam=3, nbest=2)
    assert dataclasses.replace(TranslateConfig(), **overrides.changes()) == TranslateConfig(beam=3, nbest=2)
    assert hash(overrides) == hash(SearchOverrides(beam=3, nbest=2)) and overrides != SearchOverrides(beam=3, nbest=1)
