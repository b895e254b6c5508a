"""The one thread that runs the model for mtkit serve: collect queued requests up to a token budget or a delay,
decode them together (one search per set of search overrides) and answer each request's future; other work on the
model (a glossary's alignment pass) runs there too, between searches.

Works over either engine's translator (mtkit.engines.contract.Translating); stdlib threads only, no HTTP.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mtkit.console import warn
from mtkit.search.config import SearchOverrides

if TYPE_CHECKING:
    from mtkit.engines.contract import Translating


@dataclass
class WorkerJob:
    """One request's source ids on their way through the worker; `future` gets its hypotheses."""

    ids: list[list[int]]
    search: SearchOverrides
    future: Future = field(default_factory=Future)
    prefixes: list[list[int]] | None = None  # forced target ids per line ([] for none)
    terms: list[list[list[int]]] | None = None  # per line, the target ids of each glossary term the search places
    align: bool = False  # hypotheses with their attention (a "replace" term's alignment), where the search keeps it

    @property
    def tokens(self) -> int:
        return sum(len(seq) + 1 for seq in self.ids)  # + eos, as the batches count them


@dataclass
class WorkerCall:
    """Other work on the model's thread, which alone may use the model: `run(translator)`, its answer in `future`
    (the "replace" way's alignment pass over a request's outputs)."""

    run: Callable[[Translating], Any]
    future: Future = field(default_factory=Future)
    tokens: int = 0  # counts nothing towards a batch's budget


def group_by_options(jobs: list[WorkerJob]) -> list[list[WorkerJob]]:
    """Jobs split by their search overrides, first-come order kept within and across groups: one search per group."""
    groups: dict[SearchOverrides, list[WorkerJob]] = {}
    for job in jobs:
        groups.setdefault(job.search, []).append(job)
    return list(groups.values())


class BatchWorker:
    """The one thread that runs the model: collect, decode together, answer each job's future."""

    def __init__(self, translator: Translating, max_batch_tokens: int, max_delay_ms: float, queue_size: int) -> None:
        self.translator = translator
        self.max_batch_tokens = max_batch_tokens
        self.max_delay_s = max_delay_ms / 1000
        self._queue: queue.Queue[WorkerJob | WorkerCall | None] = queue.Queue()
        self._slots = threading.BoundedSemaphore(queue_size)  # bounds memory: admitted, unanswered requests
        self._pending = 0
        self._stopped = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="mtkit-serve-worker", daemon=True)
        # Told of each batch decoded: (lines, source tokens, target tokens of the best hypotheses); the metrics'.
        self.on_batch: Callable[[int, int, int], None] | None = None
        # Source ids decoded once on the thread before its first job (mtkit.serve.readiness sets them): the first
        # batch pays for allocations and kernel choices, not a client. `warmed` is set once done (at once without).
        self.warm_up: list[list[int]] | None = None
        self.warm_up_error = ""
        self.warmed = threading.Event()

    @property
    def pending(self) -> int:
        """Requests admitted and not yet answered."""
        return self._pending

    @property
    def alive(self) -> bool:
        """Taking work: not stopped, and its thread has not died (jobs submitted before start() wait for it)."""
        return not self._stopped and (self._thread.ident is None or self._thread.is_alive())

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Answer everything queued, then end the thread."""
        self._stopped = True
        self._queue.put(None)
        if self._thread.ident is not None:
            self._thread.join()

    def submit(self, job: WorkerJob | WorkerCall) -> bool:
        """Queue a job; False (nothing queued) when the queue is full or the worker has stopped."""
        if not self.alive or not self._slots.acquire(blocking=False):
            return False
        with self._lock:
            self._pending += 1
        self._queue.put(job)
        return True

    def _run(self) -> None:
        self._warm()
        while (first := self._queue.get()) is not None:
            jobs = self._collect(first)
            for call in jobs:
                if isinstance(call, WorkerCall):
                    self._call(call)
            for group in group_by_options([job for job in jobs if isinstance(job, WorkerJob)]):
                self._decode(group)

    def _warm(self) -> None:
        """Decode the warm-up lines with the model's own search options; jobs queued meanwhile wait for it."""
        try:
            if self.warm_up is not None:
                self.translator.search_ids(self.warm_up)
        except Exception as exc:  # noqa: BLE001 - an unready server says why, and keeps taking work
            self.warm_up_error = f"{type(exc).__name__}: {exc}"
            warn(f"warm-up failed:\n{traceback.format_exc()}")
        finally:
            self.warmed.set()

    def _collect(self, first: WorkerJob | WorkerCall) -> list[WorkerJob | WorkerCall]:
        """`first` and whatever arrives until the token budget is reached or the delay has passed."""
        jobs: list[WorkerJob | WorkerCall] = [first]
        tokens = first.tokens
        deadline = time.monotonic() + self.max_delay_s
        while tokens < self.max_batch_tokens:
            try:
                job = self._queue.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                break
            if job is None:  # stop() asked: decode what was collected, then end
                self._queue.put(None)
                break
            jobs.append(job)
            tokens += job.tokens
        return jobs

    def _decode(self, jobs: list[WorkerJob]) -> None:
        """One search over the jobs' lines (same overrides); each future gets its own lines' hypotheses."""
        jobs = [job for job in jobs if self._claim(job)]
        if not jobs:
            return
        cfg = dataclasses.replace(self.translator.cfg, **jobs[0].search.changes())
        translator = dataclasses.replace(self.translator, cfg=cfg)  # shares the model; only options differ
        error: Exception | None = None
        try:
            ids = [seq for job in jobs for seq in job.ids]
            align = any(job.align for job in jobs)
            results = translator.search_ids(ids, joined_prefixes(jobs), joined_terms(jobs), align)
        except Exception as exc:  # noqa: BLE001 - a bug or out of memory fails these requests, not the service
            warn(f"translation failed for {len(jobs)} request(s):\n{traceback.format_exc()}")
            error = exc
        if error is None and self.on_batch is not None:
            source = sum(job.tokens for job in jobs)
            self.on_batch(len(results), source, sum(len(hyps[0].tokens) + 1 for hyps in results if hyps))
        start = 0
        for job in jobs:
            if error is None:
                job.future.set_result(results[start : start + len(job.ids)])
            else:
                job.future.set_exception(error)
            start += len(job.ids)
            self._release()

    def _call(self, call: WorkerCall) -> None:
        """Run a call on the model; its failure fails its request alone."""
        if not self._claim(call):
            return
        try:
            call.future.set_result(call.run(self.translator))
        except Exception as exc:  # noqa: BLE001 - as a failed search: this request, not the service
            warn(f"work on the model failed:\n{traceback.format_exc()}")
            call.future.set_exception(exc)
        finally:
            self._release()

    def _claim(self, job: WorkerJob | WorkerCall) -> bool:
        """Mark a job running (it can no longer be cancelled); a cancelled one is dropped and its slot freed."""
        if job.future.set_running_or_notify_cancel():
            return True
        self._release()
        return False

    def _release(self) -> None:
        with self._lock:
            self._pending -= 1
        self._slots.release()


def joined_terms(jobs: list[WorkerJob]) -> list[list[list[int]]] | None:
    """The jobs' glossary terms for the search, one list per line, or None when no job has any."""
    if not any(job.terms for job in jobs):
        return None
    return [line for job in jobs for line in (job.terms or [[] for _ in job.ids])]


def joined_prefixes(jobs: list[WorkerJob]) -> list[list[int]] | None:
    """The jobs' forced prefixes, one per line ([] where a job has none), or None when no job has any."""
    if not any(job.prefixes for job in jobs):
        return None
    return [prefix for job in jobs for prefix in (job.prefixes or [[] for _ in job.ids])]
