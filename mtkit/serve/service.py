"""mtkit serve's translation service, the work its three APIs (mtkit's, LibreTranslate's, DeepL's) share: the model
picked by language pair, texts split into sentences with their spans protected, glossaries applied and the guard run
on the model's worker (mtkit.text.sentence_plan); whole lines with n-best lists, prefixes and glossary retries
(mtkit.text.line_plan); HTML; documents; language detection; what each sentence reports. No HTTP and no API's
shapes: the adapters (mtkit_api, libre_api, deepl_api, deepl_documents) read the requests and shape the answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from mtkit.documents.formats import open_job
from mtkit.documents.job import DocumentError, Job
from mtkit.documents.safety import Limits
from mtkit.engines.contract import encode_prefixes
from mtkit.engines.options import TranslateOptions
from mtkit.engines.output import best_lines, confidence, output_line, scored_rows
from mtkit.engines.plans import aligns, outputs_of, split_options, token_counter, with_alignments
from mtkit.search.config import Hypothesis, SearchOverrides
from mtkit.serve.request import RequestError
from mtkit.serve.router import Router, ServedModel
from mtkit.text.glossary import Glossary
from mtkit.text.line_plan import plan_lines, prepare_line
from mtkit.text.markup import HtmlTranslation
from mtkit.text.sentence_plan import (
    Asked,
    Output,
    Sentence,
    SplitOptions,
    TextTranslation,
    asked_terms,
    guard_counts,
    plan_translation,
    run_plan_async,
    text_logprob,
)


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


@dataclass
class Translated:
    """Texts translated, in the order asked: each text, its sentences' reports, its alternatives (the text with each
    sentence's next-best translations, rank by rank), its confidence (mean log-probability per scored token; None
    without any), the guard's counts over them all, and the warnings of their encoding."""

    texts: list[str]
    sentences: list[list[dict[str, Any]]]
    alternatives: list[list[str]]
    confidences: list[float | None]
    guard: dict[str, int]
    warnings: list[str]
    memory_segments: list[int] = field(default_factory=list)  # the memory's segments that answered or were shown

    def lines(self) -> list[str]:
        """Each text on one line, as `mtkit translate` prints it."""
        return [output_line(text).strip() for text in self.texts]


@dataclass
class Lines:
    """Whole lines translated: with nbest 1 each line's best text (`best`), else its hypotheses as (text, score),
    best first ([] for an empty line: `ranked`); each best hypothesis' confidence, and the warnings of encoding."""

    best: list[str]
    ranked: list[list[tuple[str, float]]]
    confidences: list[float | None]
    warnings: list[str]


def sentence_report(sentence: Sentence) -> dict[str, Any]:
    """One sentence of an answer: its source, translation, confidences (null where kept as written), what the
    guard did ("" for nothing), how many spans were kept as written (mtkit.text.protect) and, where a glossary's
    terms were found, each with whether its target is in the translation and how terms were applied."""
    report = {
        "source": sentence.source,
        "translation": sentence.translation,
        "confidence": sentence.confidence,
        "word_confidence": sentence.word_confidence,
        "guard": sentence.guard,
        "protected": sentence.protected,
    }
    if sentence.terms:
        report |= {"terms": sentence.terms, "method": sentence.method}
    if sentence.memory is not None:
        report["memory"] = sentence.memory.report()
    return report


def memory_segments(done: list[TextTranslation]) -> list[int]:
    """The positions of the memory's segments that answered a sentence or were its reported match."""
    return [s.memory.segment for text in done for s in text.sentences if s.memory is not None]  # type: ignore[attr-defined]


async def aligned(model: ServedModel, asked: list[str], results: list[list[Hypothesis]]) -> list[Output]:
    """The outputs of `asked`, those the plan put "replace" terms in given their alignment, as
    mtkit.engines.plans.with_alignments gives it for `mtkit translate` (the attention the search kept, else a pass),
    on the model's worker: only that thread may run the model."""
    outputs = outputs_of(model.translator.tokenizer, results)
    if not aligns(asked):
        return outputs
    return await model.on_worker(lambda translator: with_alignments(translator, asked, results, outputs))


def take(values: list[str], count: int) -> list[str]:
    """The first `count` values, removed from the list."""
    taken = values[:count]
    del values[:count]
    return taken


class TranslationService:
    """The server's models (`router`), its language detectors and its limits, and every way a request's texts are
    translated on them."""

    def __init__(self, router: Router, detectors: Detectors, strict: bool, limits: Limits) -> None:
        self.router, self.detectors, self.strict, self.limits = router, detectors, strict, limits

    def route(self, source: str | None, target: str | None) -> ServedModel:
        """The model for source -> target (mtkit.serve.router.Router.route: 400 naming the pairs served)."""
        return self.router.route(source, target)

    def options(self, model: ServedModel, source: str | None, options: TranslateOptions, split: bool) -> SplitOptions:
        """The model's split options for `source` (else its first pair's) with what the request set; `split` False
        cuts at line breaks only."""
        source = source or (model.pairs[0][0] if model.pairs else None)
        return split_options(model.translator, source, split, options)

    async def sentences(
        self,
        model: ServedModel,
        texts: list[str],
        options: SplitOptions,
        search: SearchOverrides,
        target: str | None,
        warnings: list[str],
    ) -> list[TextTranslation]:
        """Texts translated sentence by sentence (mtkit.text.sentence_plan): every sentence of them decoded in one
        job, the guard's retries in a second; what the guard did told to the model's observer."""
        tokenizer = model.translator.tokenizer

        async def translate(sentences: list[str]) -> list[Output]:
            terms = asked_terms(sentences)
            results = await model.decode(
                sentences, search, self.strict, warnings, None, target, terms, aligns(sentences)
            )
            return await aligned(model, sentences, results)

        done = await run_plan_async(plan_translation(texts, options, token_counter(tokenizer)), translate)
        if model.observer is not None:
            model.observer.guarded(model.name, [sentence.guard for text in done for sentence in text.sentences])
        return done

    async def translate_texts(
        self,
        model: ServedModel,
        texts: list[str],
        options: TranslateOptions,
        split: bool,
        source: str | None = None,
        target: str | None = None,
    ) -> Translated:
        """Plain texts, sentence by sentence (line by line when not `split`), white space as written."""
        warnings: list[str] = []
        cut = self.options(model, source, options, split)
        done = await self.sentences(model, texts, cut, options.search, target, warnings)
        return Translated(
            [text.text for text in done],
            [[sentence_report(s) for s in text.sentences] for text in done],
            [text.alternatives for text in done],
            [logprob / tokens if tokens else None for logprob, tokens in map(text_logprob, done)],
            guard_counts(done),
            warnings,
            memory_segments(done),
        )

    async def translate_whole(
        self, model: ServedModel, texts: list[str], options: SplitOptions, target: str | None, warnings: list[str]
    ) -> list[str]:
        """Texts already cut into sentences (by a document's format, by HTML's markup), each translated whole: its
        best translation with the model's own beam, through the guard."""
        search = SearchOverrides(beam=model.translator.cfg.beam, nbest=1)
        whole = replace(options, split=False)
        return [text.text for text in await self.sentences(model, texts, whole, search, target, warnings)]

    async def translate_html(
        self, model: ServedModel, documents: list[str], options: SplitOptions, target: str | None, warnings: list[str]
    ) -> list[str]:
        """HTML documents, their text translated sentence by sentence in two batches (see mtkit.text.markup), their
        markup kept; every text the markup asks for goes through the guard."""
        jobs = [HtmlTranslation(document, options.language, options.split) for document in documents]
        first = await self.translate_whole(
            model, [text for job in jobs for text in job.first], options, target, warnings
        )
        needed = [job.second(take(first, len(job.first))) for job in jobs]
        second = await self.translate_whole(model, [t for texts in needed for t in texts], options, target, warnings)
        return [job.result(take(second, len(texts))) for job, texts in zip(jobs, needed)]

    async def translate_by_source(
        self,
        texts: list[str],
        sources: list[str],
        target: str,
        options: TranslateOptions,
        split: bool,
        html: bool,
        nbest: int = 1,
    ) -> Translated:
        """Each text by the model of its source language, the models decoding side by side; HTML keeps its markup
        (no alternatives and no sentences for it); `nbest` above 1 gives each text's alternatives."""
        groups: dict[str, list[int]] = {}
        for index, language in enumerate(sources):
            groups.setdefault(language, []).append(index)
        warnings: list[str] = []

        async def one(language: str, indexes: list[int]) -> Translated:
            model = self.route(language, target)
            part = [texts[i] for i in indexes]
            if html:
                cut = self.options(model, language, options, split)
                done = await self.translate_html(model, part, cut, target, warnings)
                return Translated(done, [[] for _ in part], [[] for _ in part], [None for _ in part], {}, [])
            search = SearchOverrides(beam=max(model.translator.cfg.beam, nbest), nbest=nbest)
            return await self.translate_texts(model, part, replace(options, search=search), split, language, target)

        done = await asyncio.gather(*(one(language, indexes) for language, indexes in groups.items()))
        merged = Translated([""] * len(texts), [[] for _ in texts], [[] for _ in texts], [None] * len(texts), {}, [])
        for indexes, part in zip(groups.values(), done):
            for k, i in enumerate(indexes):
                merged.texts[i], merged.sentences[i] = part.texts[k], part.sentences[k]
                merged.alternatives[i], merged.confidences[i] = part.alternatives[k], part.confidences[k]
            for label, count in part.guard.items():
                merged.guard[label] = merged.guard.get(label, 0) + count
            merged.warnings += part.warnings
            merged.memory_segments += part.memory_segments
        merged.warnings += warnings
        return merged

    async def translate_lines(
        self,
        model: ServedModel,
        lines: list[str],
        options: TranslateOptions,
        prefixes: list[str] | None = None,
        source: str | None = None,
        target: str | None = None,
    ) -> Lines:
        """Lines translated whole by the line plan (mtkit.text.line_plan), as `mtkit translate` translates them: each
        with its prefix (a prefix longer than the model's positions is a 422 naming it); a line whose best output
        lacks a glossary term goes again by the glossary's next method."""
        warnings: list[str] = []
        tokenizer, search = model.translator.tokenizer, options.search
        ids = encode_prefixes(tokenizer, prefixes)
        for index, tokens in enumerate(ids or []):
            if len(tokens) > model.translator.max_source_tokens:
                limit = model.translator.max_source_tokens
                raise RequestError(422, f"prefix[{index}]: {len(tokens)} tokens, over the model's {limit}")
        cut = self.options(model, source, options, False)
        results: list[list[Hypothesis]] = [[] for _ in lines]

        async def translate(asked: Asked) -> list[Output]:
            forced = None if ids is None else [ids[i] for i in asked.rows]
            found = await model.decode(
                list(asked), search, self.strict, warnings, forced, target, asked_terms(asked), aligns(asked)
            )
            for i, hyps in zip(asked.rows, found, strict=True):
                results[i] = hyps
            return await aligned(model, asked, found)

        plan = plan_lines([prepare_line(line, cut, prefixes is None) for line in lines])
        done = await run_plan_async(plan, translate)  # type: ignore[arg-type]
        confidences = [confidence(hyps[0]) if hyps else None for hyps in results]
        if search.nbest == 1:
            best = [line.finish(text)[0] for line, text in zip(done, best_lines(tokenizer, results))]
            return Lines(best, [], confidences, warnings)
        rows = scored_rows(tokenizer, results)
        ranked = [[(line.finish(text)[0], score) for text, score in row] for line, row in zip(done, rows)]
        return Lines([], ranked, confidences, warnings)

    async def open_document(self, name: str, data: bytes, language: str, target: str) -> Job:
        """A document's Job, its sentences of `language`, to be translated into `target` (a catalog's plural forms);
        one mtkit will not take is a 400."""
        try:
            return await asyncio.to_thread(open_job, name, data, language, self.limits, target)
        except DocumentError as exc:
            raise RequestError(400, str(exc)) from None

    async def translate_document(
        self,
        job: Job,
        source: str,
        target: str,
        glossary: Glossary | None = None,
        memory: TranslateOptions | None = None,
    ) -> bytes:
        """A document's sentences through the model's worker with every other request's, each once, then its bytes
        built; a document that cannot be written back is a 400. `memory`: options whose translation memory (and
        threshold) the sentences are answered from where it holds them."""
        model = self.route(source, target)
        memory = memory or TranslateOptions()
        asked = replace(memory, glossary=glossary)
        options = self.options(model, source, asked, False)
        texts = list(dict.fromkeys(job.texts))
        found = dict(zip(texts, await self.translate_whole(model, texts, options, target, [])))
        try:
            return await asyncio.to_thread(job.finish, [found[text] for text in job.texts])
        except DocumentError as exc:
            raise RequestError(400, str(exc)) from None
