"""mtkit serve's model thread (mtkit.serve.worker), in process: what it collects into one search, how it splits
a collection by options, and how each request's future is answered, cancelled or failed.

A recording translator shows the searches the worker asks for; one test runs the tiny model to show the answers
are those of a search of each request alone.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mtkit.search.config import Hypothesis, SearchOverrides, TranslateConfig
from mtkit.serve.worker import BatchWorker, WorkerCall, WorkerJob, group_by_options, joined_prefixes
from tests.conftest import read_gz_lines

TIMEOUT_S = 120


@dataclass
class RecordingTranslator:
    """The worker's view of an engine: records each search (lines, beam, nbest, prefixes); a line's hypotheses are
    its own ids, nbest times. A line starting with -1 makes the search raise."""

    cfg: TranslateConfig = field(default_factory=TranslateConfig)
    searches: list = field(default_factory=list)

    def search_ids(
        self, ids: list[list[int]], prefixes: list[list[int]] | None = None, terms=None, align: bool = False
    ) -> list[list[Hypothesis]]:
        self.searches.append((ids, self.cfg.beam, self.cfg.nbest, prefixes))
        if any(seq[:1] == [-1] for seq in ids):
            raise RuntimeError("search failed")
        return [[Hypothesis(list(seq), 0.0, 0.0)] * self.cfg.nbest for seq in ids]


def worker_for(translator: RecordingTranslator, max_batch_tokens: int = 10_000, queue_size: int = 16) -> BatchWorker:
    return BatchWorker(translator, max_batch_tokens=max_batch_tokens, max_delay_ms=0, queue_size=queue_size)


def job_for(ids: list[list[int]], beam: int, nbest: int, prefixes: list[list[int]] | None = None) -> WorkerJob:
    return WorkerJob(ids, SearchOverrides(beam=beam, nbest=nbest), prefixes=prefixes)


def test_jobs_are_grouped_by_beam_and_nbest_in_arrival_order() -> None:
    jobs = [
        job_for([[1]], 1, 1),
        job_for([[2]], 4, 1),
        job_for([[3]], 1, 1),
        job_for([[4]], 4, 2),
        job_for([[5]], 4, 1),
    ]
    assert [[jobs.index(j) for j in group] for group in group_by_options(jobs)] == [[0, 2], [1, 4], [3]]
    assert group_by_options([]) == []


def test_a_job_counts_its_tokens_with_one_eos_per_line() -> None:
    assert job_for([[1, 2, 3], [], [4]], 1, 1).tokens == 4 + 1 + 2


def test_prefixes_are_joined_line_by_line_or_left_out() -> None:
    plain, forced = job_for([[1], [2]], 4, 1), job_for([[3]], 4, 1, prefixes=[[9, 9]])
    assert joined_prefixes([plain, job_for([[5]], 4, 1)]) is None
    assert joined_prefixes([plain, forced]) == [[], [], [9, 9]]


def test_queued_jobs_are_searched_together_up_to_the_token_budget() -> None:
    """Jobs queued before the worker starts: collected until the budget is reached, one search per option set,
    each future answered with its own lines."""
    translator = RecordingTranslator()
    worker = worker_for(translator, max_batch_tokens=6)
    jobs = [
        job_for([[1], [2]], 4, 1),
        job_for([[3]], 2, 2),
        job_for([[4]], 4, 1),
        job_for([[5], [6]], 4, 1),
        job_for([[7]], 4, 1),
    ]
    assert all(worker.submit(job) for job in jobs) and worker.pending == 5
    worker.start()
    try:
        for job in jobs:
            assert [[h.tokens for h in hyps] for hyps in job.future.result(timeout=TIMEOUT_S)] == [
                [seq] * job.search.nbest for seq in job.ids
            ]
    finally:
        worker.stop()
    # Jobs 0-1 reach the budget (4 + 2 tokens, eos counted): one collection, two option sets, two searches;
    # jobs 2-3 the next collection; job 4 the last.
    assert [(ids, beam, nbest) for ids, beam, nbest, _ in translator.searches] == [
        ([[1], [2]], 4, 1),
        ([[3]], 2, 2),
        ([[4], [5], [6]], 4, 1),
        ([[7]], 4, 1),
    ]
    assert worker.pending == 0


def test_a_full_queue_a_cancelled_job_and_a_failed_search_leave_the_worker_working() -> None:
    translator = RecordingTranslator()
    worker = worker_for(translator, queue_size=3)
    cancelled, failing, other = job_for([[1]], 4, 1), job_for([[-1]], 2, 1), job_for([[2]], 4, 1)
    assert worker.submit(cancelled) and worker.submit(failing) and worker.submit(other)
    assert not worker.submit(job_for([[3]], 4, 1)) and worker.pending == 3  # the queue is full: nothing queued
    assert cancelled.future.cancel()  # the client went away before its search
    worker.start()
    try:
        assert other.future.result(timeout=TIMEOUT_S)[0][0].tokens == [2]
        with pytest.raises(RuntimeError, match="search failed"):
            failing.future.result(timeout=TIMEOUT_S)
        assert all(ids != [[1]] for ids, *_ in translator.searches)  # the cancelled job was never searched
        later = job_for([[5]], 4, 1)
        assert worker.submit(later) and later.future.result(timeout=TIMEOUT_S)[0][0].tokens == [5]
    finally:
        worker.stop()
    assert worker.pending == 0 and not worker.alive and not worker.submit(job_for([[6]], 4, 1))


def test_stop_answers_every_queued_job_first() -> None:
    release = threading.Event()

    class Slow(RecordingTranslator):
        def search_ids(self, ids, prefixes=None, terms=None, align=False):
            release.wait(TIMEOUT_S)
            return super().search_ids(ids, prefixes)

    worker = worker_for(Slow(), max_batch_tokens=1)  # one job per collection
    jobs = [job_for([[i]], 4, 1) for i in range(1, 4)]
    worker.start()
    assert all(worker.submit(job) for job in jobs)
    stopper = threading.Thread(target=worker.stop)
    stopper.start()
    release.set()
    stopper.join(TIMEOUT_S)
    assert not stopper.is_alive() and all(job.future.done() and not job.future.exception() for job in jobs)


def test_the_tiny_model_answers_each_job_as_its_own_search(tiny_run: Path, multi30k: Path) -> None:
    """One collection over the real engine: each job's hypotheses are those of its lines searched alone with its
    beam and nbest, prefixes forced where given."""
    from mtkit.engines.torch_engine import TorchTranslator

    translator = TorchTranslator.load(tiny_run)
    ids = translator.encode_lines(read_gz_lines(multi30k / "test_2016_flickr.en.gz", 3))
    prefix = translator.tokenizer.encode(["Ein"])[0]
    jobs = [
        job_for(ids[:2], 1, 1),
        job_for(ids, 4, 1),
        job_for(ids[2:], 1, 1),
        job_for(ids, 3, 2),
        job_for(ids[:1], 4, 1, prefixes=[prefix]),
    ]
    worker = BatchWorker(translator, max_batch_tokens=100_000, max_delay_ms=0, queue_size=len(jobs))
    assert all(worker.submit(job) for job in jobs)
    worker.start()
    try:
        for job in jobs:
            expected = TorchTranslator.load(tiny_run, **job.search.changes()).search_ids(job.ids, job.prefixes)
            got = job.future.result(timeout=TIMEOUT_S)
            assert [[h.tokens for h in hyps] for hyps in got] == [[h.tokens for h in hyps] for hyps in expected]
    finally:
        worker.stop()
    assert got[0][0].tokens[: len(prefix)] == prefix


def test_the_warm_up_runs_before_the_first_job_and_is_no_request() -> None:
    """Jobs submitted during the warm-up wait for it; it is neither pending nor batched with them; a failed
    warm-up is recorded (readiness reports it) and the worker still answers; each batch is told to on_batch."""
    translator = RecordingTranslator()
    worker = worker_for(translator)
    batches: list[tuple[int, int, int]] = []
    worker.on_batch = lambda *sizes: batches.append(sizes)
    worker.warm_up = [[7, 7]]
    job = job_for([[1, 2]], 1, 1)
    assert worker.submit(job) and worker.pending == 1 and not worker.warmed.is_set()
    worker.start()
    assert job.future.result(timeout=TIMEOUT_S) == [[Hypothesis([1, 2], 0.0, 0.0)]]
    worker.stop()
    assert worker.warmed.is_set() and worker.warm_up_error == "" and worker.pending == 0
    assert [search[0] for search in translator.searches] == [[[7, 7]], [[1, 2]]]
    assert batches == [(1, 3, 3)]  # the job's batch only: 1 line, 2 tokens + eos read, 2 + eos written
    failing = worker_for(RecordingTranslator())
    failing.warm_up = [[-1]]
    failing.start()
    assert failing.warmed.wait(TIMEOUT_S) and failing.warm_up_error == "RuntimeError: search failed"
    later = job_for([[3]], 1, 1)
    assert failing.submit(later) and later.future.result(timeout=TIMEOUT_S) == [[Hypothesis([3], 0.0, 0.0)]]
    failing.stop()


def test_other_work_runs_on_the_models_thread_and_its_failure_fails_it_alone() -> None:
    """A WorkerCall (the replace way's alignment) runs on the worker's thread between searches; one that raises
    answers its own future with the error and the worker goes on."""
    worker = worker_for(RecordingTranslator())
    worker.start()
    try:
        seen = WorkerCall(lambda translator: (threading.current_thread().name, translator))
        broken = WorkerCall(lambda translator: 1 / 0)
        assert worker.submit(seen) and worker.submit(broken)
        name, translator = seen.future.result(timeout=10)
        assert name == "mtkit-serve-worker" and translator is worker.translator
        with pytest.raises(ZeroDivisionError):
            broken.future.result(timeout=10)
        assert worker.alive and worker.pending == 0
    finally:
        worker.stop()
