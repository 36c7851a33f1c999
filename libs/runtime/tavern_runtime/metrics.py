"""A small in-process metrics registry, exposed in the Prometheus text format by
`prometheus_client` (a custom collector reads the registry at scrape time).

Handlers are counted and timed by a broker middleware; consumer lag is read from JetStream
(`consumer_info`) when `/metrics` is scraped.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from faststream import BaseMiddleware
from faststream.exceptions import HandlerException
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

QUANTILES = (0.5, 0.9, 0.99)
WINDOW = 1024  # latency quantiles are over the last WINDOW observations of a handler


class Summary:
    """Count and sum since start; quantiles over a sliding window of recent observations."""

    def __init__(self, window: int = WINDOW) -> None:
        self.count = 0
        self.total = 0.0
        self.recent: deque[float] = deque(maxlen=window)

    def observe(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.recent.append(value)

    def quantile(self, q: float) -> float:
        if not self.recent:
            return math.nan
        ordered = sorted(self.recent)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass(frozen=True)
class ConsumerLag:
    stream: str
    consumer: str
    pending: int
    ack_pending: int
    redelivered: int
    waiting: int


class Metrics:
    """Per-handler outcome counters and latency summaries of one service process."""

    def __init__(self, service: str) -> None:
        self.service = service
        self.started = time.time()
        self.handled: dict[tuple[str, str], int] = defaultdict(int)
        self.latency: dict[str, Summary] = defaultdict(Summary)

    def observe(self, handler: str, seconds: float, outcome: str) -> None:
        self.handled[(handler, outcome)] += 1
        self.latency[handler].observe(seconds)

    def render(self, lags: Sequence[ConsumerLag] = ()) -> str:
        """The Prometheus text exposition format (version 0.0.4), by `prometheus_client`."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Snapshot(self, lags))
        return generate_latest(registry).decode()


class _Snapshot(Collector):
    """The registry's state at scrape time, as metric families."""

    def __init__(self, metrics: Metrics, lags: Sequence[ConsumerLag]) -> None:
        self.metrics, self.lags = metrics, lags

    def collect(self) -> Iterator[Metric]:
        service = self.metrics.service
        start = GaugeMetricFamily(
            "tavern_start_time_seconds", "Unix time the process started.", labels=["service"]
        )
        start.add_metric([service], self.metrics.started)
        yield start
        handled = CounterMetricFamily(
            "tavern_messages_handled",
            "Messages handled, by handler and outcome.",
            labels=["service", "handler", "outcome"],
        )
        for (handler, outcome), count in sorted(self.metrics.handled.items()):
            handled.add_metric([service, handler, outcome], count)
        yield handled
        latency = Metric("tavern_handler_seconds", "Handler latency in seconds.", "summary")
        for handler, summary in sorted(self.metrics.latency.items()):
            _add_summary(latency, {"service": service, "handler": handler}, summary)
        yield latency
        yield from _lag_families(service, self.lags)


def _add_summary(family: Metric, labels: dict[str, str], summary: Summary) -> None:
    """Quantiles over the recent window (which `prometheus_client.Summary` does not keep)."""
    for q in QUANTILES:
        family.add_sample(family.name, {**labels, "quantile": str(q)}, summary.quantile(q))
    family.add_sample(f"{family.name}_sum", labels, summary.total)
    family.add_sample(f"{family.name}_count", labels, summary.count)


_LAG_FIELDS = (
    ("pending", "Messages not yet delivered to the consumer (lag)."),
    ("ack_pending", "Messages delivered and not yet acknowledged."),
    ("redelivered", "Messages delivered more than once and not yet acknowledged."),
    ("waiting", "Open pull requests."),
)


def _lag_families(service: str, lags: Sequence[ConsumerLag]) -> Iterator[Metric]:
    for field, help_text in _LAG_FIELDS:
        family = GaugeMetricFamily(
            f"tavern_consumer_{field}", help_text, labels=["service", "stream", "consumer"]
        )
        for lag in lags:
            family.add_metric([service, lag.stream, lag.consumer], getattr(lag, field))
        yield family


# --- adapters: FastStream middleware and JetStream lag --------------------------------------------


class _Timing(BaseMiddleware):
    def __init__(self, msg: Any, /, *, context: Any, metrics: Metrics) -> None:
        super().__init__(msg, context=context)
        self.metrics = metrics

    async def consume_scope(self, call_next: Callable[[Any], Awaitable[Any]], msg: Any) -> Any:
        handler = self.context.get_local("handler_")
        if handler is None:  # a reply consumed by broker.request(), not a subscriber
            return await call_next(msg)
        started, outcome = time.perf_counter(), "error"
        try:
            result = await call_next(msg)
            outcome = "ok"
            return result
        except HandlerException as exc:  # explicit Ack/Nack/Reject/Skip from the handler
            outcome = type(exc).__name__.removesuffix("Message").lower()
            raise
        finally:
            name = str(handler.specification.call_name)
            self.metrics.observe(name, time.perf_counter() - started, outcome)


def metrics_middleware(metrics: Metrics) -> Callable[..., BaseMiddleware]:
    """A broker middleware (`broker.insert_middleware(...)`) that feeds `metrics`."""

    def build(msg: Any, /, *, context: Any) -> BaseMiddleware:
        return _Timing(msg, context=context, metrics=metrics)

    return build


def jetstream_durables(subscribers: Iterable[Any]) -> list[tuple[str, str]]:
    """(stream, durable) of every JetStream subscriber with a durable consumer."""
    found: set[tuple[str, str]] = set()
    for sub in subscribers:
        stream = getattr(sub, "stream", None)
        if stream is None:
            continue
        extra = getattr(sub, "extra_options", None) or {}
        durable = extra.get("durable") or getattr(sub, "queue", None)
        if durable:
            found.add((str(stream.name), str(durable)))
    return sorted(found)


async def consumer_lags(js: Any, durables: Iterable[tuple[str, str]]) -> list[ConsumerLag]:
    """`consumer_info` of each durable; a missing one is skipped (readiness reports it)."""
    lags = []
    for stream, durable in durables:
        try:
            info = await js.consumer_info(stream, durable, timeout=2)
        except Exception:
            continue
        lags.append(
            ConsumerLag(
                stream,
                durable,
                int(info.num_pending or 0),
                int(info.num_ack_pending or 0),
                int(info.num_redelivered or 0),
                int(info.num_waiting or 0),
            )
        )
    return lags
