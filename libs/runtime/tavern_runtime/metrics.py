"""A small in-process metrics registry rendered as Prometheus text (no client library).

Handlers are counted and timed by a broker middleware; consumer lag is read from JetStream
(`consumer_info`) when `/metrics` is scraped.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from faststream import BaseMiddleware
from faststream.exceptions import HandlerException

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
        """The Prometheus text exposition format (version 0.0.4)."""
        lines = [*self._process_lines(), *self._handler_lines(), *_lag_lines(self.service, lags)]
        return "\n".join(lines) + "\n"

    def _process_lines(self) -> list[str]:
        base = {"service": self.service}
        return [
            "# HELP tavern_start_time_seconds Unix time the process started.",
            "# TYPE tavern_start_time_seconds gauge",
            _sample("tavern_start_time_seconds", base, self.started),
        ]

    def _handler_lines(self) -> list[str]:
        lines = [
            "# HELP tavern_messages_handled_total Messages handled, by handler and outcome.",
            "# TYPE tavern_messages_handled_total counter",
        ]
        for (handler, outcome), count in sorted(self.handled.items()):
            labels = {"service": self.service, "handler": handler, "outcome": outcome}
            lines.append(_sample("tavern_messages_handled_total", labels, count))
        lines += [
            "# HELP tavern_handler_seconds Handler latency in seconds.",
            "# TYPE tavern_handler_seconds summary",
        ]
        for handler, summary in sorted(self.latency.items()):
            lines += _summary_lines(self.service, handler, summary)
        return lines


def _summary_lines(service: str, handler: str, summary: Summary) -> list[str]:
    labels = {"service": service, "handler": handler}
    lines = [
        _sample("tavern_handler_seconds", {**labels, "quantile": str(q)}, summary.quantile(q))
        for q in QUANTILES
    ]
    lines.append(_sample("tavern_handler_seconds_sum", labels, summary.total))
    lines.append(_sample("tavern_handler_seconds_count", labels, summary.count))
    return lines


_LAG_FIELDS = (
    ("pending", "Messages not yet delivered to the consumer (lag)."),
    ("ack_pending", "Messages delivered and not yet acknowledged."),
    ("redelivered", "Messages delivered more than once and not yet acknowledged."),
    ("waiting", "Open pull requests."),
)


def _lag_lines(service: str, lags: Sequence[ConsumerLag]) -> list[str]:
    lines: list[str] = []
    for field, help_text in _LAG_FIELDS:
        name = f"tavern_consumer_{field}"
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        for lag in lags:
            labels = {"service": service, "stream": lag.stream, "consumer": lag.consumer}
            lines.append(_sample(name, labels, getattr(lag, field)))
    return lines


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return repr(float(value)) if isinstance(value, float) else str(value)


def _sample(name: str, labels: dict[str, str], value: float) -> str:
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return f"{name}{{{body}}} {_number(value)}"


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
