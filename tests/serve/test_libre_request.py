"""mtkit.serve.libre_request and mtkit.serve.http_body: a LibreTranslate request's fields from each way clients send
them, its checks, and the answers' shapes. Multipart bodies are encoded by urllib3 (what `requests` sends), forms by
urllib."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from urllib3 import encode_multipart_formdata

from mtkit.serve.http_body import request_fields
from mtkit.serve.libre_request import LibreRequest, parse_translate, translate_answer, unique_alternatives
from mtkit.serve.request import RequestError
from mtkit.text.glossary import Glossary

FIELDS = {"q": "Ein Hund läuft & springt.", "source": "de", "target": "en", "format": "html", "api_key": ""}


def test_json_form_multipart_and_query_give_the_same_fields() -> None:
    multipart, content_type = encode_multipart_formdata(FIELDS)
    assert request_fields(json.dumps(FIELDS).encode(), "application/json", "") == FIELDS
    assert request_fields(urlencode(FIELDS).encode(), "application/x-www-form-urlencoded", "") == FIELDS
    assert request_fields(multipart, content_type, "") == FIELDS
    assert request_fields(b"", "", urlencode(FIELDS)) == FIELDS  # deep-translator: all in the query of a POST
    # A body that opens as JSON is JSON whatever its type says (curl -d sends the form type).
    assert request_fields(json.dumps(FIELDS).encode(), "application/x-www-form-urlencoded", "") == FIELDS


def test_form_fields_win_over_the_query_and_an_empty_multipart_body_leaves_the_query() -> None:
    body = urlencode({"q": "from the body"}).encode()
    fields = request_fields(body, "application/x-www-form-urlencoded", urlencode({"q": "query", "api_key": "k"}))
    assert fields == {"q": "query", "api_key": "k"}  # as Flask's request.values: the query is read first
    assert request_fields(b"", "multipart/form-data; boundary=xyz", "q=Hallo") == {"q": "Hallo"}


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        (b"[1, 2]", "application/json", "Invalid JSON format"),
        (b'{"q": ', "application/json", "malformed JSON"),
        (b"q=%FF%FE", "application/x-www-form-urlencoded", ""),  # bytes that decode to U+FFFD are text, not an error
        (
            b"--xyz\r\nContent-Disposition: form-data\r\n\r\nvalue\r\n--xyz--\r\n",
            "multipart/form-data; boundary=xyz",
            "a part without a name",
        ),
        (b"not multipart", "multipart/form-data", "malformed multipart"),
    ],
)
def test_bad_bodies_are_400s_saying_what_is_wrong(body: bytes, content_type: str, message: str) -> None:
    if not message:
        assert request_fields(body, content_type, "")["q"] == "\ufffd\ufffd"
        return
    with pytest.raises(RequestError, match=message) as refused:
        request_fields(body, content_type, "")
    assert refused.value.status == 400


def test_a_file_part_is_refused_naming_its_field() -> None:
    body, content_type = encode_multipart_formdata({"file": ("post.html", b"<p>Hi</p>", "text/html")})
    with pytest.raises(RequestError, match="^file: files are not accepted"):
        request_fields(body, content_type, "")


def test_parse_translate_reads_each_field() -> None:
    assert parse_translate(
        {"q": ["A", "B"], "source": "AUTO", "target": "de", "alternatives": "2"}, 10, 3
    ) == LibreRequest(["A", "B"], True, "auto", "de", "text", 2)
    assert parse_translate(FIELDS, 10, 3) == LibreRequest([FIELDS["q"]], False, "de", "en", "html", 0)


def test_a_glossary_is_mtkits_extra_field_as_json_or_a_forms_json_text() -> None:
    fields = {"q": "A red dog.", "source": "en", "target": "de"}
    expected = Glossary((("red dog", "Rotfuchs"),))
    assert parse_translate(fields | {"glossary": {"red dog": "Rotfuchs"}}, 10, 3).glossary == expected
    assert parse_translate(fields | {"glossary": '{"red dog": "Rotfuchs"}'}, 10, 3).glossary == expected
    assert parse_translate(fields | {"glossary": ""}, 10, 3).glossary is None
    with pytest.raises(RequestError, match="^glossary must be an object of terms") as refused:
        parse_translate(fields | {"glossary": ["red dog"]}, 10, 3)
    assert refused.value.status == 400


def test_a_term_method_is_mtkits_extra_field_refused_with_a_400_naming_it() -> None:
    fields = {"q": "A red dog.", "source": "en", "target": "de", "glossary": {"red dog": "Rotfuchs"}}
    assert parse_translate(fields, 10, 3).term_method == ""  # the model's default
    assert parse_translate(fields | {"term_method": "check-first-inline"}, 10, 3).term_method == "check-first-inline"
    with pytest.raises(RequestError) as refused:
        parse_translate(fields | {"term_method": "hint"}, 10, 3)
    assert refused.value.status == 400 and str(refused.value) == (
        "Invalid request: term_method must be one of placeholder, inline, check-first, check-first-inline, "
        'guided, replace; got "hint"'
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"source": "en", "target": "de"}, "Invalid request: missing q parameter"),
        ({"q": "", "source": "en", "target": "de"}, "Invalid request: missing q parameter"),
        ({"q": "Hi", "target": "de"}, "Invalid request: missing source parameter"),
        ({"q": "Hi", "source": "en"}, "Invalid request: missing target parameter"),
        ({"q": "Hi", "source": "en", "target": "de", "format": "pdf"}, "pdf format is not supported"),
        ({"q": "Hi", "source": "en", "target": "de", "alternatives": "x"}, "alternatives parameter is not a number"),
        ({"q": "Hi", "source": "en", "target": "de", "alternatives": 4}, r"alternatives parameter must be <= 3"),
        ({"q": ["a"] * 11, "source": "en", "target": "de"}, r"request \(11\) exceeds text limit \(10\)"),
        ({"q": ["a", 1], "source": "en", "target": "de"}, r"q\[1\] must be a string"),
        ({"q": ["\ud800"], "source": "en", "target": "de"}, "lone surrogate"),
        ({"q": "Hi", "source": ["en"], "target": "de"}, "source must be a string"),
    ],
)
def test_parse_translate_refuses_with_libretranslates_400s(fields: dict, message: str) -> None:
    with pytest.raises(RequestError, match=message) as refused:
        parse_translate(fields, 10, 3)
    assert refused.value.status == 400


def test_answers_take_the_shape_of_q() -> None:
    one = LibreRequest(["Hallo"], False, "auto", "en")
    many = LibreRequest(["Hallo", "Welt"], True, "de", "en")
    detected = [{"confidence": 91.0, "language": "de"}]
    assert translate_answer(["Hello"], one, detected, None) == {
        "translatedText": "Hello",
        "detectedLanguage": {"confidence": 91.0, "language": "de"},
    }
    assert translate_answer(["Hello", "World"], many, None, [["Hi"], []]) == {
        "translatedText": ["Hello", "World"],
        "alternatives": [["Hi"], []],
    }


def test_alternatives_drop_repeats_the_best_and_empty_texts() -> None:
    assert unique_alternatives("a", ["b", "a", "", "b", "c"]) == ["b", "c"]
