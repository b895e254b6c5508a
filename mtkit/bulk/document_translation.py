"""`mtkit translate-file`: documents (mtkit.documents: txt, html, Markdown, docx, odt, odp, pptx, epub, srt, vtt)
translated by a model, the sentences of every document given at once going through the engine together in its
length-sorted batches (one translate_split call), each through the guard that nothing is lost; every output written
atomically in its input's format. Torch-free: the engine does the model's part.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtkit.documents.formats import detect_format, open_job
from mtkit.documents.job import Answer, Review, Translate, run_jobs
from mtkit.documents.safety import Limits
from mtkit.engines.options import TranslateOptions
from mtkit.engines.plans import outputs_of, split_options, translate_split
from mtkit.errors import check
from mtkit.files import atomic_write
from mtkit.text.sentence_plan import GUARD_LABELS, MemoryLookup, TextTranslation, guard_counts

if TYPE_CHECKING:
    from mtkit.engines.contract import Translating

REVIEWED = {"po", "xlf"}  # the formats that mark a machine-filled entry for review (fuzzy flag, XLIFF 1.2 state)


def sentence_translator(
    translator: Translating,
    language: str | None = None,
    options: TranslateOptions | None = None,
    exact: set[str] | None = None,
) -> tuple[Translate, dict[str, dict[str, int]]]:
    """A documents Translate over `translator`: sentences (already cut by their format) taken whole, the guard
    applied, protected text kept and glossary terms put back (mtkit.text.protect) as `options` says (none when
    None), and each sentence's guard counts kept in the dict returned beside it, by sentence; the sentences
    options.memory answered whole (a 100% match) added to `exact` when given."""
    whole = split_options(translator, language, False, options)
    counts: dict[str, dict[str, int]] = {}

    def translate(sentences: list[str]) -> list[str]:
        done: list[TextTranslation] = translate_split(translator, sentences, whole)
        counts.update((sentence, guard_counts([text])) for sentence, text in zip(sentences, done))
        if exact is not None:
            exact.update(sentence for sentence, text in zip(sentences, done) if _answered(text))
        return [text.text for text in done]

    return translate, counts


def whole_matches(memory: MemoryLookup) -> Answer:
    """A catalog's units answered by the memory's exact (100%) matches, as a CAT tool matches a unit whole."""

    def answer(units: list[str]) -> dict[str, str]:
        found = {unit: memory.best(unit, 100) for unit in units}
        return {unit: match.translation for unit, match in found.items() if match is not None and match.score == 100}

    return answer


PATCH_NBEST = 4  # translations of a match's differing words looked for in its target (valid band: +0.3 chrF over 1)


def nbest_texts(translator: Translating, nbest: int = PATCH_NBEST) -> Callable[[list[str]], list[list[str]]]:
    """Texts to their n best translations, best first, on the same model (its beam, at most `nbest` of it)."""
    cfg = dataclasses.replace(translator.cfg, nbest=min(nbest, translator.cfg.beam))
    searching = dataclasses.replace(translator, cfg=cfg)  # shares the model; only the search's options differ

    def translate(texts: list[str]) -> list[list[str]]:
        outputs = outputs_of(translator.tokenizer, searching.translate_hypotheses(texts))
        return [[output.text, *output.others] for output in outputs]

    return translate


def fuzzy_units(translate: Callable[[list[str]], list[list[str]]], memory: MemoryLookup, threshold: int) -> Review:
    """A catalog's units as a fuzzy match of the whole unit gives them, for review (Job.patched, Job.offered): the
    match repaired (placeables) or patched by the model's translations of the words that differ (`translate`: texts
    to their n best, asked for every unit at once), else its target offered."""

    def review(units: list[str]) -> tuple[dict[str, str], dict[str, str]]:
        found = {unit: memory.best(unit, threshold) for unit in units}
        fuzzy: dict[str, Any] = {unit: m for unit, m in found.items() if m is not None and m.score < 100}
        asks = list(dict.fromkeys(text for match in fuzzy.values() for text in match.asks()))
        said = dict(zip(asks, translate(asks))) if asks else {}
        patched, offered = {}, {}
        for unit, match in fuzzy.items():
            fixed = match.translation or match.patched(said)
            if fixed:
                patched[unit] = fixed
            else:  # as the unit's spans are written, or as stored: Job.for_review checks its placeholders
                offered[unit] = match.written or match.target
        return patched, offered

    return review


def _answered(text: TextTranslation) -> bool:
    """Whether a translation memory's exact matches gave every sentence of the text."""
    return bool(text.sentences) and all(s.memory is not None and s.memory.score == 100 for s in text.sentences)


def _summed(counts: list[dict[str, int]]) -> dict[str, int]:
    return {key: sum(c.get(key, 0) for c in counts) for key in ("sentences", *GUARD_LABELS, "protected")}


def output_path(source: Path, target_lang: str) -> Path:
    """Where a document's translation goes without --out: beside it, the target language before its extension
    (report.docx -> report.de.docx); a gettext template's translation is a catalog (app.pot -> app.de.po)."""
    suffix = ".po" if source.suffix.lower() == ".pot" else source.suffix
    return source.with_name(f"{source.stem}.{target_lang or 'translated'}{suffix}")


def translate_documents(
    translator: Translating,
    sources: list[Path],
    outputs: list[Path],
    language: str | None = None,
    limits: Limits = Limits(),
    options: TranslateOptions | None = None,
    fuzzy: bool = True,
) -> dict[str, Any]:
    """Every source read, checked and cut into sentences before any is translated (a bad one fails the command
    before the model works), all their sentences translated together, each output written atomically. A
    document's sentences and the total are the guard's count (each sentence as often as its document has it).
    `fuzzy`: a gettext catalog's machine-filled entries are flagged fuzzy, as Poedit's pre-translation does (not
    those a translation memory's 100% matches filled); where every document is such a catalog, a sentence whose
    fuzzy match the model's output departs from is given the match's target (TranslateOptions.memory_fill)."""
    check(len(sources) == len(outputs), "one output per document")
    for source, out in zip(sources, outputs):
        check(source.is_file(), f"{source}: no such file")
        check(source.resolve() != out.resolve(), f"{out}: is the document itself; give another --out")
    language = language or translator.info.get("manifest", {}).get("source_lang")
    target = translator.cfg.target_lang or translator.info.get("manifest", {}).get("target_lang") or ""
    jobs, formats = [], []
    for source in sources:
        data = source.read_bytes()
        formats.append(detect_format(source.name, data))
        jobs.append(open_job(source.name, data, language or "en", limits, target, fuzzy))
    exact: set[str] = set()
    review = None
    if options is not None and options.memory is not None and fuzzy and set(formats) <= REVIEWED:
        # Every entry filled goes to review: an unpatched fuzzy match may offer its target, as msgmerge does.
        options = dataclasses.replace(options, memory_fill=True)
        review = fuzzy_units(nbest_texts(translator), options.memory, options.memory_threshold)
    translate, by_sentence = sentence_translator(translator, language, options, exact)
    start = time.perf_counter()
    answer = whole_matches(options.memory) if options and options.memory else None
    documents = run_jobs(jobs, translate, exact, answer, review)
    seconds = time.perf_counter() - start
    for out, document in zip(outputs, documents):
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(out) as stream:
            stream.write(document)
    guards = [_summed([by_sentence[text] for text in job.texts]) for job in jobs]
    return {
        "documents": [
            {"input": str(s), "output": str(o), "format": f, **j.counts, **g}
            for s, o, f, j, g in zip(sources, outputs, formats, jobs, guards)
        ],
        "guard": _summed(guards),
        "seconds": round(seconds, 3),
    }
