"""The models one mtkit serve holds: each with its language pairs and its own worker thread, a request routed
to the model of its (source, target), and a batch of lines encoded, decoded on a model's worker and awaited.

No HTTP framework and no engine code: models come in as translators (mtkit.engines.contract.Translating).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from mtkit.corpus.language_pairs import language_pairs
from mtkit.engines.contract import Translating, encode_terms, encode_texts, source_codes
from mtkit.errors import UserError, check
from mtkit.search.config import Hypothesis, SearchOverrides
from mtkit.serve.request import RequestError
from mtkit.serve.worker import BatchWorker, WorkerCall, WorkerJob

T = TypeVar("T")


def model_pairs(translator: Translating) -> list[tuple[str, str]]:
    """The (source, target) language pairs a model translates, every direction of a multilingual one ([] when its
    data names none)."""
    return language_pairs(translator.tokenizer, translator.info.get("manifest", {}))


class Observing(Protocol):
    """What a model tells the server's metrics (mtkit.serve.metrics.Metrics): the sentences it was given and what
    the guard did to each."""

    def decoded(self, model: str, lines: list[str]) -> None: ...

    def guarded(self, model: str, actions: list[str]) -> None: ...


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # NAME of NAME=PATH: no path separators


@dataclass
class ServedModel:
    """One loaded model: where it came from, what it translates, and the thread that decodes for it."""

    name: str  # what clients see (named_runs): never the path it was loaded from
    translator: Translating
    worker: BatchWorker
    pairs: list[tuple[str, str]] = field(default_factory=list)
    observer: Observing | None = None

    async def decode(
        self,
        lines: list[str],
        search: SearchOverrides,
        strict: bool,
        warnings: list[str],
        prefixes: list[list[int]] | None = None,
        target: str | None = None,
        terms: list[tuple[str, ...]] | None = None,
        align: bool = False,
    ) -> list[list[Hypothesis]]:
        """The n-best of each line, decoded with whatever else is queued (`align`: with their attention where the
        engine's search keeps it): 400 a target the model lacks (or none for a multilingual model, whose lines then
        begin with their codes), 413 over-long (strict), 503 queue full.

        A multilingual model's lines start with their target's code, so requests into different languages share
        its batches."""
        translator = self.translator
        try:
            codes, texts = source_codes(
                translator.tokenizer, lines, target or translator.cfg.target_lang, option="target"
            )
        except UserError as exc:
            raise RequestError(400, str(exc)) from None
        try:
            ids = encode_texts(
                translator.tokenizer,
                codes,
                texts,
                translator.max_source_tokens,
                strict=strict,
                on_warning=warnings.append,
            )
        except UserError as exc:
            raise RequestError(413, str(exc)) from None
        job = WorkerJob(ids, search, prefixes=prefixes, terms=encode_terms(translator.tokenizer, terms), align=align)
        self._submit(job)
        if self.observer is not None:
            self.observer.decoded(self.name, texts)
        return await self._answer(job)

    async def on_worker(self, run: Callable[[Translating], T]) -> T:
        """`run(translator)` on the model's thread, in turn with the searches (the "replace" way's alignment)."""
        call = WorkerCall(run)
        self._submit(call)
        return await self._answer(call)

    def _submit(self, job: WorkerJob | WorkerCall) -> None:
        if not self.worker.submit(job):
            raise RequestError(503, "server busy: the model's queue is full (--queue-size); retry later")

    async def _answer(self, job: WorkerJob | WorkerCall) -> Any:
        try:
            return await asyncio.wrap_future(job.future)
        except Exception as exc:  # noqa: BLE001 - the worker logged the traceback
            raise RequestError(500, f"translation failed: {type(exc).__name__}: {exc}") from None


def pair_text(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{source}->{target}" for source, target in sorted(pairs)) or "none"


class Router:
    """The server's models by language pair; every pair is served by exactly one model."""

    def __init__(self, models: list[ServedModel]) -> None:
        check(bool(models), "no model to serve")
        self.models = models
        self.by_pair: dict[tuple[str, str], ServedModel] = {}
        for model in models:
            for pair in model.pairs:
                other = self.by_pair.get(pair)
                check(
                    other is None,
                    f"{other.name if other else ''} and {model.name} both translate "
                    f"{pair[0]}->{pair[1]}: serve one model per language pair",
                )
                self.by_pair[pair] = model
        check(
            len(models) == 1 or all(model.pairs for model in models),
            f"{next((m.name for m in models if not m.pairs), '')}: its data manifest names no languages, so "
            "requests cannot be routed to it; serve it alone",
        )

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return sorted(self.by_pair)

    def languages(self) -> list[str]:
        """Every language served, as a source or a target, sorted."""
        return sorted({code for pair in self.by_pair for code in pair})

    def targets(self, source: str) -> list[str]:
        return sorted(target for src, target in self.by_pair if src == source)

    def sources(self, target: str) -> list[str]:
        return sorted(source for source, tgt in self.by_pair if tgt == target)

    def route(self, source: str | None, target: str | None) -> ServedModel:
        """The model for source -> target; given one of them, the one model that matches it (a multilingual model
        alone takes its target by itself); given neither, the only model. 400 when that is unknown or ambiguous."""
        if source is None and target is None:
            if len(self.models) == 1:
                return self.models[0]
            raise RequestError(
                400,
                f"this server holds {len(self.models)} models: give source and target "
                f"(pairs served: {pair_text(self.pairs)})",
            )
        for code in (source, target):
            if code is not None and code not in self.languages():
                raise RequestError(
                    400, f"{code} is not supported (languages served: {', '.join(self.languages()) or 'none'})"
                )
        found = {
            id(model): model
            for (src, tgt), model in self.by_pair.items()
            if source in (None, src) and target in (None, tgt)
        }
        wanted = f"{source or '?'}->{target or '?'}"
        if not found:
            raise RequestError(400, f"no model translates {wanted}; pairs served: {pair_text(self.pairs)}")
        if len(found) > 1:
            raise RequestError(
                400,
                f"several models translate {wanted}: give both source and target (pairs served: "
                f"{pair_text(self.pairs)})",
            )
        return next(iter(found.values()))

    def start(self) -> None:
        for model in self.models:
            model.worker.start()

    def stop(self) -> None:
        for model in self.models:
            model.worker.stop()

    @property
    def pending(self) -> int:
        return sum(model.worker.pending for model in self.models)

    @property
    def alive(self) -> bool:
        return all(model.worker.alive for model in self.models)

    def describe_languages(self, name: Any) -> list[dict[str, Any]]:
        """GET /languages: [{"code", "name", "targets"}] for every language served (targets [] where none)."""
        return [{"code": code, "name": name(code), "targets": self.targets(code)} for code in self.languages()]


def expand_runs(run_dirs: list[Path]) -> list[Path]:
    runs: list[Path] = []
    for path in run_dirs:
        if path.is_file():
            lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
            runs += [Path(line) for line in lines if line and not line.startswith("#")]
        else:
            runs.append(path)
    return runs


def named_runs(run_dirs: list[Path]) -> list[tuple[str, Path]]:
    """(name, path) of each model to serve, a listing file expanded: `NAME=PATH` names it, else its directory's
    name does (a checkpoint's: its run's); a repeated name gets -2, -3. Clients see the names, never a path of
    the server."""
    named: list[tuple[str, Path]] = []
    for path in expand_runs(run_dirs):
        given, _, rest = str(path).partition("=")
        if rest and _NAME.fullmatch(given) and not path.exists():
            name, path = given, Path(rest)
        else:
            named_by = path.parent if path.suffix == ".pt" else path  # a checkpoint: its run's name
            name = named_by.name or named_by.resolve().name or "model"
        taken, unique, k = {n for n, _ in named}, name, 1
        while unique in taken:
            k += 1
            unique = f"{name}-{k}"
        named.append((unique, path))
    return named
