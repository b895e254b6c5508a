"""LibreTranslate's endpoints on mtkit serve: POST /translate with `q` (text or HTML, source "auto" detected),
POST /detect, GET /languages and GET /frontend/settings, answered by the models of a Router.

Request parsing and answer shapes live in mtkit.serve.libre_request, markup in mtkit.text.markup; no HTTP framework
here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from mtkit.engines.plans import split_options
from mtkit.serve.libre_request import (
    LibreRequest,
    detection,
    frontend_settings,
    parse_translate,
    text_field,
    translate_answer,
    unique_alternatives,
)
from mtkit.serve.request import RequestError, SearchOverrides
from mtkit.serve.router import Router, ServedModel
from mtkit.serve.uploads import supported_formats
from mtkit.text.markup import HtmlTranslation
from mtkit.text.sentence_plan import Sentence, SplitOptions


class Detecting(Protocol):
    """mtkit.language_id.LanguageDetector as used here: candidates best first, per text."""

    def detect(self, texts: Sequence[str]) -> list[list[Any]]: ...


class Detectors:
    """Language identification restricted to the languages that matter for a request, made once per set."""

    def __init__(self, make: Callable[[Sequence[str]], Detecting] | None, why_not: str = "") -> None:
        self._make = make
        self._why_not = why_not
        self._made: dict[tuple[str, ...], Detecting] = {}

    def get(self, languages: Sequence[str]) -> Detecting:
        if self._make is None:
            raise RequestError(500, f"language detection is not available on this server: {self._why_not}")
        key = tuple(sorted(languages))
        if key not in self._made:
            self._made[key] = self._make(key)
        return self._made[key]

    async def best(self, texts: list[str], languages: Sequence[str]) -> list[Any]:
        """The most likely of `languages` for each text (off the event loop: detection is CPU work)."""
        if len(languages) == 1:  # nothing to choose between
            return [_Sure(languages[0]) for _ in texts]
        found = await asyncio.to_thread(self.get(languages).detect, texts)
        return [candidates[0] if candidates else _Sure(languages[0], 0.0) for candidates in found]


class _Sure:
    def __init__(self, language: str, confidence: float = 100.0) -> None:
        self.language, self.confidence = language, confidence


def sentence_fields(sentence: Sentence) -> dict[str, Any]:
    """One sentence of an answer: its source, translation, confidences (null where kept as written), what the
    guard did ("" for nothing), how many spans were kept as written (mtkit.text.protect) and, where a glossary's
    terms were found, each with whether its target is in the translation and how terms were applied."""
    fields = {
        "source": sentence.source,
        "translation": sentence.translation,
        "confidence": sentence.confidence,
        "word_confidence": sentence.word_confidence,
        "guard": sentence.guard,
        "protected": sentence.protected,
    }
    if sentence.terms:
        fields |= {"terms": sentence.terms, "method": sentence.method}
    return fields


async def translate_texts(
    model: ServedModel,
    texts: list[str],
    alternatives: int,
    options: SplitOptions,
    strict: bool,
    warnings: list[str],
    target: str | None = None,
) -> tuple[list[str], list[list[str]], list[list[dict[str, Any]]]]:
    """Plain texts, sentence by sentence (line by line when not split), white space as written; with alternatives,
    the n-best's others rank by rank; and each text's sentences with their confidences."""
    nbest = alternatives + 1
    search = SearchOverrides(beam=max(model.translator.cfg.beam, nbest), nbest=nbest)
    done = await model.translate_split(texts, options, search, strict, warnings, target)
    others = [unique_alternatives(text.text, text.alternatives) for text in done]
    return [text.text for text in done], others, [[sentence_fields(s) for s in text.sentences] for text in done]


async def translate_html_documents(
    model: ServedModel,
    documents: list[str],
    options: SplitOptions,
    strict: bool,
    warnings: list[str],
    target: str | None = None,
) -> list[str]:
    """HTML documents, their text translated sentence by sentence in two batches (see mtkit.text.markup), their
    markup kept; every text the markup asks for goes through the guard."""
    jobs = [HtmlTranslation(document, options.language, options.split) for document in documents]

    async def translate(texts: list[str]) -> list[str]:  # the markup gives sentences, without line breaks
        return await model.translate_whole(texts, options, strict, warnings, target)

    first = await translate([text for job in jobs for text in job.first])
    needed = [job.second(take(first, len(job.first))) for job in jobs]
    second = await translate([text for texts in needed for text in texts])
    return [job.result(take(second, len(texts))) for job, texts in zip(jobs, needed)]


def take(values: list[str], count: int) -> list[str]:
    """The first `count` values, removed from the list."""
    taken = values[:count]
    del values[:count]
    return taken


async def libre_translate(
    fields: dict[str, Any], router: Router, detectors: Detectors, max_lines: int, max_beam: int, strict: bool
) -> dict[str, Any]:
    """POST /translate in LibreTranslate's shape; texts of one request may go to several models (source auto)."""
    request = parse_translate(fields, max_lines, max_beam - 1)
    detected = None
    if request.source == "auto":
        sources = router.sources(request.target)
        if not sources:
            raise RequestError(
                400,
                f"nothing translates into {request.target} here; targets served: "
                f"{', '.join(sorted({t for _, t in router.pairs})) or 'none'}",
            )
        found = await detectors.best(request.texts, sources)
        languages = [item.language for item in found]
        detected = [detection(item.language, item.confidence) for item in found]
    else:
        router.route(request.source, request.target)  # 400 naming the pairs served
        languages = [request.source] * len(request.texts)
    translations, alternatives, sentences = await translate_grouped(request, languages, router, strict)
    return translate_answer(
        translations,
        request,
        detected,
        alternatives if request.alternatives else None,
        sentences if request.format == "text" else None,
    )


async def translate_grouped(
    request: LibreRequest, languages: list[str], router: Router, strict: bool
) -> tuple[list[str], list[list[str]], list[list[dict[str, Any]]]]:
    """Each text translated by the model of its source language, the models decoding side by side."""
    groups: dict[str, list[int]] = {}
    for index, language in enumerate(languages):
        groups.setdefault(language, []).append(index)
    warnings: list[str] = []

    async def one(language: str, indexes: list[int]) -> tuple[list[str], list[list[str]], list[list[dict]]]:
        model = router.route(language, request.target)
        texts = [request.texts[i] for i in indexes]
        options = split_options(
            model.translator, language, request.split, glossary=request.glossary, term_method=request.term_method
        )
        if request.format == "html":  # as LibreTranslate: no alternatives for HTML
            done = await translate_html_documents(model, texts, options, strict, warnings, request.target)
            return done, [[] for _ in texts], [[] for _ in texts]
        return await translate_texts(model, texts, request.alternatives, options, strict, warnings, request.target)

    done = await asyncio.gather(*(one(language, indexes) for language, indexes in groups.items()))
    translations, alternatives, sentences = [""] * len(languages), [[] for _ in languages], [[] for _ in languages]
    for indexes, (texts, others, parts) in zip(groups.values(), done):
        for i, text, other, part in zip(indexes, texts, others, parts):
            translations[i], alternatives[i], sentences[i] = text, other, part
    return translations, alternatives, sentences


async def libre_detect(fields: dict[str, Any], router: Router, detectors: Detectors) -> list[dict[str, Any]]:
    """POST /detect: the candidates for q among every language this server serves, best first."""
    q = fields.get("q")
    text = "\n".join(q) if isinstance(q, list) and all(isinstance(t, str) for t in q) else text_field(fields, "q")
    if not text.strip():
        raise RequestError(400, "Invalid request: missing q parameter")
    found = await asyncio.to_thread(detectors.get(router.languages()).detect, [text])
    return [detection(item.language, item.confidence) for item in found[0]]


def settings(router: Router, max_bytes: int, keys_required: bool, name: Callable[[str], str]) -> dict[str, Any]:
    """GET /frontend/settings: source "auto", the first model's target; charLimit is --max-bytes; the document
    formats of POST /translate_file."""
    target = router.pairs[0][1] if router.pairs else "en"
    return frontend_settings(
        max_bytes,
        keys_required,
        {"code": "auto", "name": "Auto Detect"},
        {"code": target, "name": name(target)},
        supported_formats(),
    )
