"""GET /ready for mtkit serve: ready only when every model has decoded its warm-up line, every worker runs, the
shared state store answers (when there is one) and the server is not draining; else 503 with the reason; and the
drain itself: SIGTERM with --drain-seconds fails readiness first and stops the server after.

GET /health stays the liveness check (the process answers). No HTTP framework here: the app asks `check`.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from typing import Any

from mtkit.console import log
from mtkit.engines.contract import encode_texts, source_codes
from mtkit.serve.router import Router, ServedModel

WARM_UP_LINE = "Hello."  # any short line: the first batch pays for allocations and kernel choices, not a client


class Readiness:
    """Whether the server should be sent traffic; `store_check` returns "" when the store answers, else why not."""

    def __init__(self, router: Router, store_check: Callable[[], str] | None = None) -> None:
        self.router = router
        self.store_check = store_check
        self.draining = False

    def prepare_warm_up(self) -> None:
        """Give every model's worker its warm-up line, decoded on its thread before its first job (before start)."""
        for model in self.router.models:
            model.worker.warm_up = warm_up_ids(model)

    async def check(self) -> str:
        """Empty when ready, else the first reason not to send this server requests."""
        if self.draining:
            return "draining: the server is stopping"
        for model in self.router.models:
            if not model.worker.alive:
                return f"{model.name}: its worker has stopped"
            if not model.worker.warmed.is_set():
                return f"{model.name}: loading (warm-up not finished)"
            if model.worker.warm_up_error:
                return f"{model.name}: warm-up failed: {model.worker.warm_up_error}"
        if self.store_check is not None:
            problem = await asyncio.to_thread(self.store_check)
            if problem:
                return f"state store: {problem}"
        return ""


def warm_up_ids(model: ServedModel) -> list[list[int]]:
    """The warm-up line's source ids, into the model's target (a multilingual model's first pair's when unset)."""
    translator = model.translator
    target = translator.cfg.target_lang or (model.pairs[0][1] if model.pairs else None)
    codes, texts = source_codes(translator.tokenizer, [WARM_UP_LINE], target, option="target")
    return encode_texts(translator.tokenizer, codes, texts, translator.max_source_tokens)


def drain_first(
    exit_now: Callable[[int, Any], None], readiness: Readiness, seconds: float
) -> Callable[[int, Any], None]:
    """uvicorn's signal handler, SIGTERM put off by --drain-seconds: GET /ready fails at once while requests are
    still served, so the balancer stops sending before the port closes. A second signal stops at once."""

    def handle(sig: int, frame: Any) -> None:
        if sig != signal.SIGTERM or readiness.draining or seconds <= 0:
            exit_now(sig, frame)
            return
        readiness.draining = True
        log(f"draining: GET /ready answers 503 for {seconds:g} s (--drain-seconds), then the server stops")
        timer = threading.Timer(seconds, exit_now, (sig, None))
        timer.daemon = True
        timer.start()

    return handle
