"""DeepL's v2 API as mtkit serve speaks it: a request's fields (JSON, or a urlencoded or multipart form with `text`
repeated, the query filling in), the key (`Authorization: DeepL-Auth-Key KEY` or the older `auth_key`), the checks
of /v2/translate's fields (400 naming the field), DeepL's language codes, glossary entries as TSV or CSV, and the
answers' shapes. Pure functions of bytes and strings: no HTTP framework, no model, no state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from mtkit.errors import UserError, check
from mtkit.files import read_lines
from mtkit.serve.forms import form_parts
from mtkit.serve.request import RequestError, check_texts, decode_json, looks_like_json
from mtkit.text.glossary import FORMATS, parse_glossary

MAX_TEXTS = 50  # DeepL's limit of `text` per request
MAX_GLOSSARY_ENTRIES = 10_000  # a glossary's entries; each is matched against every sentence it is used on
LISTS = ("text", "ignore_tags", "splitting_tags", "non_splitting_tags", "glossary_ids")
SPLIT_SENTENCES = ("0", "1", "nonewlines")
TAG_HANDLING = ("html", "xml")
FORMALITY_QUIET = ("default", "prefer_more", "prefer_less")  # answered as for a language without formality
FORMALITY_REFUSED = ("more", "less")
INDEXED = re.compile(r"(?P<list>[a-z_]+)\[(?P<index>[0-9]{1,4})\]\.(?P<field>[a-z_]+)")  # dictionaries[0].entries
MAX_INDEX = 100  # a form's list of objects: an index past this is refused, not grown into a list that long
# DeepL's regional targets for a language the server has once: what /v2/languages?type=target lists for it.
REGIONAL = {"en": ("EN-GB", "EN-US"), "pt": ("PT-BR", "PT-PT"), "zh": ("ZH-HANS", "ZH-HANT")}


@dataclass
class DeepLTranslate:
    """A POST /v2/translate: texts, languages (lower-case codes as the server's models name them), and options."""

    texts: list[str]
    target: str
    source: str | None  # None: detected
    split: bool = True
    tag_handling: str = ""  # "", "html" or "xml"
    ignore_tags: list[str] = field(default_factory=list)
    glossary_id: str = ""
    show_billed_characters: bool = False
    memory_id: str = ""  # translation_memory_id: the key's memory, its exact matches answering sentences
    memory_threshold: int = 75  # translation_memory_threshold
    context: bool = False  # `context` was sent: accepted, and the answer says it was not used


def body_fields(body: bytes, content_type: str, query: str) -> dict[str, Any]:
    """The fields of a JSON object, or of a form (the names of LISTS collected as lists), the query filling in; an
    empty body is the query's fields alone; any other body is a 400."""
    fields: dict[str, Any] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        add_field(fields, name, value)
    kind = content_type.split(";")[0].strip().lower()
    if not body.strip():
        return fields
    if kind == "application/json" or looks_like_json(body):
        data = decode_json(body)
        if not isinstance(data, dict):
            raise RequestError(400, "the JSON body must be an object")
        return {**fields, **data}
    if kind == "multipart/form-data":  # text fields in order; file parts are not read here
        parts = form_parts(body, content_type)
        form = [(p.name, p.text(charset=False)) for p in parts if p.name is not None and p.filename is None]
    elif kind in ("application/x-www-form-urlencoded", ""):
        try:
            form = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            raise RequestError(400, "the body is neither JSON nor a form (application/x-www-form-urlencoded)") from None
    else:
        raise RequestError(400, f"the body must be JSON or a form, not {kind}")
    named = {name for name, _ in form}
    fields = {name: value for name, value in fields.items() if name not in named}  # the body wins over the query
    for name, value in form:
        add_field(fields, name, value)
    return fields


def add_field(fields: dict[str, Any], name: str, value: str) -> None:
    """One form field; `dictionaries[N].source_lang`, as DeepL's Node SDK sends v3 glossaries in a form, is item N
    of a list of objects, as JSON would send it."""
    indexed = INDEXED.fullmatch(name)
    if indexed:
        items = fields.setdefault(indexed["list"], [])
        index = int(indexed["index"])
        if not isinstance(items, list) or index >= MAX_INDEX:
            raise RequestError(400, f"Value for '{name}' not supported")
        items.extend({} for _ in range(index + 1 - len(items)))
        items[index].setdefault(indexed["field"], value)
    elif name in LISTS:
        fields.setdefault(name, []).append(value)
    else:
        fields.setdefault(name, value)


def auth_key(authorization: str, fields: dict[str, Any]) -> str | None:
    """The key of `Authorization: DeepL-Auth-Key KEY`, else of the older `auth_key` field; None without one."""
    scheme, _, key = authorization.strip().partition(" ")
    if scheme.lower() == "deepl-auth-key" and key.strip():
        return key.strip()
    value = fields.get("auth_key")
    return value if isinstance(value, str) and value else None


def string_field(fields: dict[str, Any], name: str, default: str = "") -> str:
    value = fields.get(name, default)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, str):
        raise RequestError(400, f"Value for '{name}' not supported: it must be a string")
    return value


def flag(fields: dict[str, Any], name: str) -> bool:
    """A boolean as JSON sends it or a form ("1", "0", "true", "false")."""
    value = fields.get(name, False)
    if isinstance(value, str) and value.strip().lower() in ("1", "0", "true", "false", ""):
        value = value.strip().lower() in ("1", "true")
    if not isinstance(value, bool):
        raise RequestError(400, f"Value for '{name}' not supported: it must be true or false")
    return value


def tag_list(fields: dict[str, Any], name: str) -> list[str]:
    """A list of tag names: a JSON list, or comma-separated strings (one or repeated)."""
    value = fields.get(name, [])
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(item, str) for item in values):
        raise RequestError(400, f"Value for '{name}' not supported: a list of tag names")
    return [tag.strip() for item in values for tag in item.split(",") if tag.strip()]


def language(code: str, name: str) -> str:
    """A DeepL code (any case, a regional variant such as EN-GB or PT-BR) as the server's models name it: "en"."""
    base = code.strip().lower().split("-")[0]
    if not base.isalpha() or not 2 <= len(base) <= 3:
        raise RequestError(400, f"Value for '{name}' not supported: {code!r} is not a language code")
    return base


def parse_translate(fields: dict[str, Any]) -> DeepLTranslate:
    """POST /v2/translate's fields checked: 400 naming the field, as DeepL words it."""
    texts = fields.get("text")
    texts = [texts] if isinstance(texts, str) else texts
    if not texts or not isinstance(texts, list):
        raise RequestError(400, "Parameter 'text' not specified.")
    if len(texts) > MAX_TEXTS:
        raise RequestError(400, f"Too many texts: {len(texts)} in 'text', at most {MAX_TEXTS} per request")
    check_texts(texts, lambda index, why: f"Value for 'text' not supported: text[{index}] is not {why}")
    if not string_field(fields, "target_lang"):
        raise RequestError(400, "Value for 'target_lang' not supported.")
    target = language(string_field(fields, "target_lang"), "target_lang")
    source_code = string_field(fields, "source_lang")
    source = language(source_code, "source_lang") if source_code else None
    split = string_field(fields, "split_sentences", "1").lower()
    if split not in SPLIT_SENTENCES:
        raise RequestError(
            400, f"Value for 'split_sentences' not supported: choose one of {', '.join(SPLIT_SENTENCES)}"
        )
    tags = string_field(fields, "tag_handling").lower()
    if tags and tags not in TAG_HANDLING:
        raise RequestError(400, f"Value for 'tag_handling' not supported: choose html or xml, not {tags!r}")
    check_formality(string_field(fields, "formality", "default").lower())
    for name in ("preserve_formatting", "outline_detection"):
        flag(fields, name)  # accepted: mtkit keeps white space and casing as written, and reads no outline
    for name in ("splitting_tags", "non_splitting_tags"):
        tag_list(fields, name)  # accepted: mtkit's markup ends sentences at block elements, as for HTML
    glossary = string_field(fields, "glossary_id")
    if glossary and source is None:
        raise RequestError(400, "Use of a glossary requires the 'source_lang' parameter to be specified.")
    memory_id, threshold = memory_fields(fields)
    return DeepLTranslate(
        texts,
        target,
        source,
        split=split != "0",
        tag_handling=tags,
        ignore_tags=tag_list(fields, "ignore_tags"),
        glossary_id=glossary,
        show_billed_characters=flag(fields, "show_billed_characters"),
        memory_id=memory_id,
        memory_threshold=threshold,
        context=bool(string_field(fields, "context")),
    )


def memory_fields(fields: dict[str, Any]) -> tuple[str, int]:
    """translation_memory_id and translation_memory_threshold (0-100, default 75; needs the id), 400 naming them."""
    memory_id = string_field(fields, "translation_memory_id")
    raw = fields.get("translation_memory_threshold", 75)
    if "translation_memory_threshold" in fields and not memory_id:
        raise RequestError(400, "Value for 'translation_memory_threshold' needs 'translation_memory_id'")
    try:
        threshold = int(raw) if type(raw) is not bool else -1
    except (TypeError, ValueError):
        threshold = -1
    if not 0 <= threshold <= 100:
        raise RequestError(400, "Value for 'translation_memory_threshold' not supported: a whole number 0-100")
    return memory_id, threshold


def check_formality(formality: str) -> None:
    """default and prefer_* are answered as for a language without formality; more and less need a model trained
    for it, which mtkit has not: a 400 naming the field, as DeepL answers for a target without the feature."""
    if formality in FORMALITY_REFUSED:
        raise RequestError(
            400,
            f"'formality' is not supported for the given 'target_lang': {formality!r} needs a "
            "model trained for formality; use prefer_more or prefer_less, which fall back quietly",
        )
    if formality not in FORMALITY_QUIET:
        raise RequestError(400, f"Value for 'formality' not supported: {formality!r}")


CONTEXT_UNUSED = "context: not used; mtkit's models translate each sentence alone"


def translation_answer(
    texts: list[str], translations: list[str], detected: list[str], billed: bool, context: bool = False
) -> dict[str, Any]:
    """{"translations": [{"detected_source_language", "text"(, "billed_characters")}]}, in the order of `text`;
    with `context` sent, "warnings": [CONTEXT_UNUSED] beside them (DeepL's SDKs ignore the field)."""
    answer = []
    for source, text, language_code in zip(texts, translations, detected):
        item: dict[str, Any] = {"detected_source_language": language_code.upper(), "text": text}
        if billed:
            item["billed_characters"] = len(source)
        answer.append(item)
    return {"translations": answer} | ({"warnings": [CONTEXT_UNUSED]} if context else {})


def languages_answer(codes: list[str], kind: str, name: Any) -> list[dict[str, Any]]:
    """GET /v2/languages: sources as {"language", "name"}; targets with their regional variants and
    supports_formality (false: no model here is trained for formality)."""
    if kind == "source":
        return [{"language": code.upper(), "name": name(code)} for code in codes]
    answer = []
    for code in codes:
        for variant in REGIONAL.get(code, (code.upper(),)):
            suffix = "" if variant == code.upper() else f" ({variant.split('-')[1]})"
            answer.append({"language": variant, "name": name(code) + suffix, "supports_formality": False})
    return answer


def glossary_entries(text: str, entries_format: str) -> list[tuple[str, str]]:
    """A glossary's entries from DeepL's TSV (source TAB target per line) or CSV (source,target[,src,tgt]), read by
    mtkit.text.glossary: at most MAX_GLOSSARY_ENTRIES, a malformed line a 400 naming it."""
    if entries_format not in FORMATS:
        raise RequestError(400, f"Value for 'entries_format' not supported: tsv or csv, not {entries_format!r}")
    try:
        glossary = parse_glossary(text, entries_format, "entries", MAX_GLOSSARY_ENTRIES)
    except UserError as exc:
        raise RequestError(400, f"Invalid glossary entries: {exc}") from None
    if not len(glossary):
        raise RequestError(400, "Invalid glossary entries: no entry")
    return list(glossary.entries)


def entries_tsv(entries: tuple[tuple[str, str], ...]) -> str:
    return "".join(f"{source}\t{target}\n" for source, target in entries)


def read_character_limits(path: str | Path) -> dict[str, int]:
    """--character-limits FILE: KEY CHARACTERS per line (# comments), DeepL's character_limit for that key."""
    limits: dict[str, int] = {}
    for number, line in enumerate(read_lines(path), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        check(
            len(fields) == 2 and fields[1].isdigit() and int(fields[1]) >= 1,
            f"{path}:{number}: expected KEY CHARACTERS, a whole number of characters, at least 1",
        )
        check(fields[0] not in limits, f"{path}:{number}: this key is listed twice")
        limits[fields[0]] = int(fields[1])
    return limits
