"""mtkit serve's Prometheus metrics (GET /metrics): requests by route, API and status, latency per route and model,
queue depth and batch sizes, what each model translated, guard actions and file bytes.

Labels are bounded sets (route templates, API names, status codes, model names): never a client's address, key or
text. One registry per app, so that apps made in one process do not share counts; a server is one process, so no
multiprocess mode is needed. prometheus-client, part of the `serve` extra, is imported when the app is built; a
server without it runs all the same, its /metrics a 503 saying how to install it.
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mtkit.console import log

if TYPE_CHECKING:
    from mtkit.serve.router import Router

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds: from a one-line request on a small model to a document of many pages.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
LINE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
TOKEN_BUCKETS = (16, 64, 256, 1024, 4096, 16384, 65536)
# The API each route belongs to; /translate is mtkit's or LibreTranslate's by its body (RequestLabels.api).
LIBRE_ROUTES = {"/detect", "/languages", "/frontend/settings", "/translate_file", "/download_file/{name}"}
OTHER_ROUTE = "other"  # a path no route matched (404): one label, whatever the path
METRICS_HINT = "GET /metrics needs prometheus-client: pip install -e '.[serve]'"


@dataclass
class RequestLabels:
    """What a request's handlers learn about it on the way: the API it spoke and the models that translated it."""

    api: str = ""
    models: list[str] = field(default_factory=list)


_CURRENT: contextvars.ContextVar[RequestLabels | None] = contextvars.ContextVar("mtkit_request_labels", default=None)


def current_labels() -> RequestLabels:
    """The labels of the request being handled (a throwaway outside one): handlers add the API and models."""
    return _CURRENT.get() or RequestLabels()


def route_api(route: str, labels: RequestLabels) -> str:
    if labels.api:
        return labels.api
    if route.startswith("/v2/"):
        return "deepl"
    return "libretranslate" if route in LIBRE_ROUTES else "mtkit"


def load_metrics() -> Metrics | None:
    """The server's metrics, or None (one log line) where prometheus-client is not installed."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        log(f"metrics disabled: {METRICS_HINT}")
        return None
    return Metrics()


class Metrics:
    """The server's counters, gauges and histograms in their own registry."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        from prometheus_client.platform_collector import PlatformCollector
        from prometheus_client.process_collector import ProcessCollector

        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)  # memory, CPU seconds, open files of this process
        PlatformCollector(registry=self.registry)
        r = self.registry
        self.requests = Counter(
            "mtkit_requests", "HTTP requests answered, by route, API and status", ("route", "api", "status"), registry=r
        )
        self.latency = Histogram(
            "mtkit_request_seconds",
            "Seconds from a request's arrival to its answer, by route and the model that translated it ('' if none)",
            ("route", "model"),
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "mtkit_queue_depth", "Requests admitted to a model's worker, unanswered", ("model",), registry=r
        )
        self.batch_lines = Histogram(
            "mtkit_batch_lines", "Lines per batch the worker decoded", ("model",), buckets=LINE_BUCKETS, registry=r
        )
        self.batch_tokens = Histogram(
            "mtkit_batch_tokens",
            "Source tokens per batch the worker decoded",
            ("model",),
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.sentences = Counter(
            "mtkit_translated_sentences",
            "Sentences (or whole lines) given to a model, guard retries included",
            ("model",),
            registry=r,
        )
        self.characters = Counter(
            "mtkit_translated_characters", "Characters of the sentences given to a model", ("model",), registry=r
        )
        self.tokens = Counter(
            "mtkit_translated_tokens",
            "Tokens a model read (source) and wrote (target, best hypothesis)",
            ("model", "side"),
            registry=r,
        )
        self.guard = Counter(
            "mtkit_guard_actions",
            "Sentences the guard retried, kept as written or tamed",
            ("model", "action"),
            registry=r,
        )
        self.file_bytes = Counter(
            "mtkit_file_bytes", "Document bytes uploaded, translated and downloaded", ("direction",), registry=r
        )

    def watch(self, router: Router) -> None:
        """Every model of the router tells these metrics what it decodes; its queue depth is read when scraped."""
        for model in router.models:
            model.observer = self
            model.worker.on_batch = functools.partial(self.batch, model.name)
            self.watch_queue(model.name, lambda worker=model.worker: worker.pending)

    def watch_queue(self, model: str, pending: Callable[[], int]) -> None:
        """The model's queue depth, read when /metrics is scraped."""
        self.queue_depth.labels(model).set_function(pending)

    def batch(self, model: str, lines: int, source_tokens: int, target_tokens: int) -> None:
        """One batch the model's worker decoded."""
        self.batch_lines.labels(model).observe(lines)
        self.batch_tokens.labels(model).observe(source_tokens)
        self.tokens.labels(model, "source").inc(source_tokens)
        self.tokens.labels(model, "target").inc(target_tokens)

    def decoded(self, model: str, lines: list[str]) -> None:
        """Sentences (or lines) handed to the model's worker."""
        current_labels().models.append(model)
        self.sentences.labels(model).inc(len(lines))
        self.characters.labels(model).inc(sum(len(line) for line in lines))

    def guarded(self, model: str, actions: list[str]) -> None:
        """What the guard did to each sentence ("" for nothing)."""
        for action in actions:
            if action:
                self.guard.labels(model, action).inc()

    def files(self, direction: str, size: int) -> None:
        self.file_bytes.labels(direction).inc(size)

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class MetricsMiddleware:
    """Counts each HTTP request by its route template, API and status, and times it (app.add_middleware(
    MetricsMiddleware, metrics=...)). Pure ASGI: no BaseHTTPMiddleware, whose task per request would change how a
    client's disconnect reaches the endpoints."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        labels = RequestLabels()
        token = _CURRENT.set(labels)
        status = [500]  # what a client sees when the app fails before answering
        started = time.perf_counter()

        async def send_status(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            _CURRENT.reset(token)
            route = getattr(scope.get("route"), "path", OTHER_ROUTE)
            self.metrics.requests.labels(route, route_api(route, labels), str(status[0])).inc()
            models = sorted(set(labels.models)) or [""]
            elapsed = time.perf_counter() - started
            for model in models:
                self.metrics.latency.labels(route, model).observe(elapsed)
