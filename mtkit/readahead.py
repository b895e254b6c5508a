"""Read ahead: the items of an iterable produced on a daemon thread into a bounded queue.

Used where the consumer must not wait for the producer: training collates the next micro-batches while a step
computes (mtkit.corpus.binarized.prefetch_groups), translate reads lines while a chunk is translated
(mtkit.engines.streaming.read_paused_chunks).
Stdlib only.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator

END = object()  # what get() returns after the last item


class ReadAhead:
    """Up to `depth` items of `items` made ahead on a thread named `name`; an exception the producer raises is
    raised by get() in the consumer's thread, in its place in the sequence. close() stops the producer at its
    next item; one blocked inside the iterable (an open, silent stdin) cannot be stopped and dies with the
    process, hence the daemon thread."""

    def __init__(self, items: Iterable[object], depth: int, name: str) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, args=(items,), name=name, daemon=True)
        self._thread.start()

    def get(self, timeout: float | None = None) -> object:
        """The next item, or END after the last; raises queue.Empty when none came within `timeout` seconds."""
        item = self._queue.get(timeout=timeout)
        if isinstance(item, BaseException):
            raise item
        return item

    def __iter__(self) -> Iterator[object]:
        while (item := self.get()) is not END:
            yield item

    def close(self, timeout: float | None = None) -> None:
        """Stop the producer and wait for its thread (at most `timeout` seconds)."""
        self._stop.set()
        self._thread.join(timeout)

    def _produce(self, items: Iterable[object]) -> None:
        last: object = END
        try:
            for item in items:
                if not self._put(item):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            last = exc
        self._put(last)

    def _put(self, item: object) -> bool:
        """Put `item`, waiting while the queue is full; False once the consumer has closed."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False
