"""mtkit's own HTTP API on mtkit serve: POST /translate with `text` checked field by field (`check_request`, the
errors a client is told) and answered in mtkit's shape from the translation service (mtkit.serve.service); GET /,
the page to try a model; GET /health; GET /info, the models and this server's settings. Reads and shapes only: the
translating is the service's; the app (mtkit.serve.app) sends POST /translate here when its body is mtkit's.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations as objects.

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtkit import __version__
from mtkit.engines.contract import Translating
from mtkit.engines.options import TranslateOptions
from mtkit.errors import UserError
from mtkit.memory.matching import DEFAULT_THRESHOLD
from mtkit.search.config import SearchOverrides
from mtkit.serve.config import ServeConfig
from mtkit.serve.memory_state import ServedMemories
from mtkit.serve.request import RequestError, glossary_field, term_method_field
from mtkit.serve.service import TranslationService
from mtkit.serve.state import owner_of
from mtkit.text.line_plan import guarded
from mtkit.text.protect import ProtectConfig

# The refusal of an unknown field lists them in this order: the search fields beam and nbest after text.
REQUEST_KEYS = (
    "text",
    "beam",
    "nbest",
    "prefix",
    "source",
    "target",
    "split_sentences",
    "glossary",
    "protect",
    "term_method",
    "memory",
    "memory_threshold",
    "api_key",
)
# GET /: a page to try the model in a browser; one file, no outside assets (the service may run offline).
PAGE = (Path(__file__).parent / "static" / "index.html").read_text(encoding="utf-8")
# Recipe fields that hold paths of the machine that trained or serves the model: a client never sees them.
PRIVATE_FIELDS = {
    "preprocess": ("train", "valid", "test", "corpora", "hf_cache_dir", "spm_model"),
    "train": ("init_from", "tensorboard_dir"),
}


@dataclass
class TranslateRequest:
    lines: list[str]
    # beam and nbest (applied over the model's own search by its worker), glossary, protected patterns, term method
    options: TranslateOptions
    prefixes: list[str] | None = None  # text each line's translation must begin with ("" for none)
    source: str | None = None  # language codes that pick the model of a server of several
    target: str | None = None
    split: bool = True  # each text sentence by sentence; False: each line one segment
    memory: str = ""  # a translation memory's name or id (mtkit.serve.memory_state), "" for none


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
    """A decoded POST /translate body checked field by field ("api_key" is checked as the body is read)."""
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
    glossary, protect, method = glossary_field(data, 422), protect_field(data), term_method_field(data, 422)
    memory = data.get("memory", "")
    if not isinstance(memory, str):
        raise RequestError(422, "memory must be a translation memory's name or id")
    threshold = int_option(data, "memory_threshold", DEFAULT_THRESHOLD, 0, 100)
    options = TranslateOptions(search, glossary, protect, method, memory_threshold=threshold)
    return TranslateRequest(lines, options, prefixes, *language_codes(data), split, memory)


def protect_field(data: dict) -> ProtectConfig:
    """The optional "protect": regular expressions whose matches are kept as written, beside the defaults."""
    patterns = data.get("protect") or []
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise RequestError(422, 'protect must be a list of regular expressions, such as ["ACME-\\d+"]')
    try:
        return ProtectConfig(patterns=tuple(patterns))
    except UserError as exc:
        raise RequestError(422, str(exc)) from None


def language_codes(data: dict) -> tuple[str | None, str | None]:
    """The body's "source" and "target" codes, lower-cased (None where absent); not a string is a 422."""
    codes = []
    for name in ("source", "target"):
        code = data.get(name)
        if code is not None and not isinstance(code, str):
            raise RequestError(422, f'{name} must be a language code such as "en"')
        codes.append(code.lower() if code else None)
    return codes[0], codes[1]


async def translate(
    data: Any, service: TranslationService, cfg: ServeConfig, memories: ServedMemories | None = None
) -> dict[str, Any]:
    """mtkit's POST /translate: {"text": [...]} checked and translated by its model, each text sentence by sentence
    unless "split_sentences" is false (or nbest / prefix ask for whole lines); encoding's warnings in the answer.
    "memory": the key's translation memory (`memories`), whose exact matches answer sentences and whose fuzzy ones
    each sentence reports."""
    model = service.route(*language_codes(data)) if isinstance(data, dict) else service.router.models[0]
    parsed = check_request(data, cfg.max_lines, cfg.max_beam, model.translator.cfg.beam)
    split, nbest = parsed.split, parsed.options.search.nbest
    index = None
    if parsed.memory and memories is not None:
        if not guarded(split, True, nbest, parsed.prefixes is not None):
            raise RequestError(422, "memory answers sentences: drop nbest and prefix, or memory")
        pair = model.pairs[0] if model.pairs else (None, None)
        source, target = parsed.source or pair[0], parsed.target or pair[1]
        index = await memories.index(owner_of(data.get("api_key")), parsed.memory, source, target)
        parsed.options = dataclasses.replace(parsed.options, memory=index)
    answer: dict[str, Any]
    # The sentence plan's guard or the line plan, by the rule `mtkit translate` follows, so both answer alike.
    if guarded(split, True, nbest, parsed.prefixes is not None):
        done = await service.translate_texts(model, parsed.lines, parsed.options, split, parsed.source, parsed.target)
        answer = {"translations": done.texts if split else done.lines(), "sentences": done.sentences}
        answer["guard"] = done.guard
        if not split:
            answer["confidences"] = done.confidences
        if index is not None and memories is not None:
            await memories.used(index, done.memory_segments)
    else:
        done = await service.translate_lines(
            model, parsed.lines, parsed.options, parsed.prefixes, parsed.source, parsed.target
        )
        if nbest == 1:
            answer = {"translations": done.best, "confidences": done.confidences}
        else:
            answer = {"translations": [[{"text": text, "score": score} for text, score in row] for row in done.ranked]}
    if done.warnings:
        answer["warnings"] = done.warnings
    return answer


def public_recipe(configs: dict[str, Any]) -> dict[str, Any]:
    """The recipe a model was trained with, less the fields that name files (PRIVATE_FIELDS)."""
    return {
        section: {k: v for k, v in values.items() if k not in PRIVATE_FIELDS.get(section, ())}
        if isinstance(values, dict)
        else values
        for section, values in configs.items()
    }


def model_info(translator: Translating, cfg: ServeConfig) -> dict[str, Any]:
    """GET /info: the model, its languages, sizes and recipe, and this server's settings and limits."""
    manifest = translator.info.get("manifest", {})
    configs = translator.info.get("configs", {})
    facts = translator.describe()
    return {
        "mtkit": __version__,
        "checkpoint": Path(translator.info.get("checkpoint") or "").name,  # the file's name: no server path
        "source_lang": manifest.get("source_lang"),
        "target_lang": manifest.get("target_lang"),
        "language_codes": translator.tokenizer.language_codes(),  # a multilingual model's targets ([] for others)
        "vocab_size": translator.tokenizer.vocab_size,
        "model": {"arch": facts["arch"], "parameters": facts["parameters"], **configs.get("model", {})},
        "translate": dataclasses.asdict(translator.cfg),
        "recipe": public_recipe(configs),
        "engine": cfg.engine.engine,
        "shortlist": cfg.engine.shortlist,  # CTranslate2 searches the run's shortlist only (--shortlist)
        "device": str(translator.device),
        "dtype": facts["dtype"],
        "workers": translator.workers,
        "limits": {
            key: getattr(cfg, key)
            for key in ("max_lines", "max_bytes", "max_beam", "queue_size", "max_delay_ms", "strict")
        }
        | {"max_batch_tokens": translator.cfg.batch_tokens, "api_keys": cfg.api_keys is not None},
    }


def add_mtkit_routes(app: Any, service: TranslationService, info: dict[str, Any]) -> None:
    """GET / (and POST /, which Nextcloud's LibreTranslate client sends to test its connection), GET /health and
    GET /info on the FastAPI app."""
    from fastapi.responses import HTMLResponse, JSONResponse

    router = service.router

    @app.get("/")
    @app.post("/")
    async def page() -> HTMLResponse:
        return HTMLResponse(PAGE)

    @app.get("/health")
    async def health() -> JSONResponse:
        status = 200 if router.alive else 503
        return JSONResponse({"status": "ok" if router.alive else "worker stopped", "pending": router.pending}, status)

    @app.get("/info")
    async def model_information() -> dict:
        return info
