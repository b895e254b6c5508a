"""LibreTranslate's HTTP API as mtkit serve speaks it: a request's checks (400 naming the field, as LibreTranslate
words them) and the answers' shapes; its fields come from JSON, a form or the query (mtkit.serve.forms).

Pure functions of strings: no HTTP framework, no model, no detector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mtkit.serve.request import RequestError, check_texts, decode_json, glossary_field, term_method_field
from mtkit.text.glossary import Glossary

FORMATS = ("text", "html")


@dataclass
class LibreRequest:
    """A POST /translate in LibreTranslate's words: `q` one text or a list (`batch`) and what to do with it."""

    texts: list[str]
    batch: bool
    source: str  # a language code or "auto"
    target: str
    format: str = "text"
    alternatives: int = 0
    split: bool = True  # mtkit's own extra field split_sentences: false translates each line whole
    glossary: Glossary | None = None  # mtkit's own extra field: {"source term": "target term", ...}
    term_method: str = ""  # mtkit's own extra field: how the glossary is applied ("": the model's default)


def text_field(fields: dict[str, Any], name: str, required: bool = True) -> str:
    """A string field; missing or empty is LibreTranslate's 400 "Invalid request: missing NAME parameter"."""
    value = fields.get(name)
    if value in (None, ""):
        if required:
            raise RequestError(400, f"Invalid request: missing {name} parameter")
        return ""
    if not isinstance(value, str):
        raise RequestError(400, f"Invalid request: {name} must be a string")
    return value


def libre_refusal(index: int, why: str) -> str:
    """LibreTranslate's words for a text of `q` that is not a string or not valid Unicode."""
    if why == "a string":
        return f"Invalid request: q[{index}] must be a string"
    return f"Invalid request: q[{index}] is not valid Unicode (a lone surrogate)"


def texts_field(fields: dict[str, Any], max_lines: int) -> tuple[list[str], bool]:
    """`q`: one text or a list of texts (then `batch`), each valid Unicode; at most max_lines of them."""
    q = fields.get("q")
    if q in (None, "", []):
        raise RequestError(400, "Invalid request: missing q parameter")
    batch = isinstance(q, list)
    texts = q if batch else [q]
    if len(texts) > max_lines:
        raise RequestError(400, f"Invalid request: request ({len(texts)}) exceeds text limit ({max_lines})")
    check_texts(texts, libre_refusal)
    return texts, batch


def parse_translate(fields: dict[str, Any], max_lines: int, max_alternatives: int) -> LibreRequest:
    """A LibreTranslate POST /translate: q, source, target, format (text or html), alternatives."""
    texts, batch = texts_field(fields, max_lines)
    source = text_field(fields, "source").lower()
    target = text_field(fields, "target").lower()
    text_format = text_field(fields, "format", required=False) or "text"
    if text_format not in FORMATS:
        raise RequestError(400, f"{text_format} format is not supported")
    alternatives = fields.get("alternatives", 0)
    try:
        alternatives = max(0, int(alternatives))
    except (TypeError, ValueError):
        raise RequestError(400, "Invalid request: alternatives parameter is not a number") from None
    if alternatives > max_alternatives:
        raise RequestError(400, f"Invalid request: alternatives parameter must be <= {max_alternatives}")
    glossary = fields.get("glossary")
    if isinstance(glossary, str):  # a form sends the object as JSON text
        glossary = decode_json(glossary.encode("utf-8")) if glossary.strip() else None
    split = flag_field(fields, "split_sentences")
    glossary = glossary_field({"glossary": glossary}, 400)
    method = term_method_field(fields, 400, "Invalid request: ")
    return LibreRequest(texts, batch, source, target, text_format, alternatives, split, glossary, method)


def flag_field(fields: dict[str, Any], name: str, default: bool = True) -> bool:
    """A true/false field as JSON (true, false) or a form sends it ("true", "false", "1", "0"); else a 400."""
    value = fields.get(name, default)
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "false", "0"):
        value = value.strip().lower() in ("true", "1")
    if not isinstance(value, bool):
        raise RequestError(400, f"Invalid request: {name} must be true or false")
    return value


def detection(language: str, confidence: float) -> dict[str, Any]:
    """LibreTranslate's detectedLanguage object."""
    return {"confidence": round(float(confidence), 1), "language": language}


def translate_answer(
    translations: list[str],
    request: LibreRequest,
    detected: list[dict] | None,
    alternatives: list[list[str]] | None,
    sentences: list[list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """{"translatedText": str or list, "detectedLanguage"?: ..., "alternatives"?: ..., "sentences"?: ...} shaped as
    q was; "sentences" (mtkit's, each with its confidence) is not LibreTranslate's, and its clients ignore it."""

    def shaped(values: list) -> Any:
        return values if request.batch else values[0]

    answer: dict[str, Any] = {"translatedText": shaped(translations)}
    if detected is not None:
        answer["detectedLanguage"] = shaped(detected)
    if alternatives is not None:
        answer["alternatives"] = shaped(alternatives)
    if sentences is not None:
        answer["sentences"] = shaped(sentences)
    return answer


def unique_alternatives(best: str, others: list[str]) -> list[str]:
    """The n-best's other texts, without repeats, the best or empty ones (LibreTranslate's filter_unique)."""
    seen = {best, ""}
    kept = []
    for text in others:
        if text not in seen:
            seen.add(text)
            kept.append(text)
    return kept


def frontend_settings(
    char_limit: int, keys_required: bool, source: dict, target: dict, file_formats: list[str]
) -> dict[str, Any]:
    """GET /frontend/settings: what LibreTranslate's own page and Nextcloud read before translating."""
    return {
        "charLimit": char_limit,
        "frontendTimeout": 500,
        "apiKeys": keys_required,
        "keyRequired": keys_required,
        "suggestions": False,
        "filesTranslation": bool(file_formats),
        "supportedFilesFormat": file_formats,
        "language": {"source": source, "target": target},
    }
