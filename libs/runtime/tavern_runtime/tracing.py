"""OpenTelemetry tracing of a turn across processes: the tracer of a process, the W3C trace
context (`traceparent`, `tracestate`) in NATS message headers, and the span helpers the services
call at their span points (docs/tracing.md).

Tracing is on only when an OTLP endpoint is configured (`TAVERN_OTLP_ENDPOINT`, else
`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`). Off, every helper returns
at its first line: no OpenTelemetry module is imported and nothing is added to a header.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import structlog

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, SpanContext, Tracer
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
CARRIED = (TRACEPARENT, TRACESTATE)
"""The headers that carry a trace context (W3C Trace Context) on inputs, RPCs and events."""
OTEL_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
TRACES_PATH = "/v1/traces"

Kind = Literal["internal", "server", "client", "producer", "consumer"]
Attributes = Mapping[str, str | int | float | bool]
LazyAttributes = Attributes | Callable[[], Attributes] | None
"""Attributes, or a function that makes them, called only when tracing is on."""
_NOOP: AbstractContextManager[None] = contextlib.nullcontext()


@dataclass
class _Tracing:
    service: str
    provider: TracerProvider
    tracer: Tracer
    propagator: TraceContextTextMapPropagator


_on: _Tracing | None = None


def endpoint(configured: str = "", environ: Mapping[str, str] | None = None) -> str | None:
    """The OTLP/HTTP traces URL: `configured` (a base URL, as `TAVERN_OTLP_ENDPOINT` gives it),
    else OpenTelemetry's own variables; None when none is set (tracing stays off)."""
    env = os.environ if environ is None else environ
    if configured.strip():
        return _traces_url(configured.strip())
    specific = env.get(OTEL_ENDPOINT_VARS[0], "").strip()
    if specific:
        return specific  # the traces endpoint itself, used as given (OTel's rule)
    base = env.get(OTEL_ENDPOINT_VARS[1], "").strip()
    return _traces_url(base) if base else None


def _traces_url(base: str) -> str:
    base = base.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


def configure_tracing(
    service: str, configured: str = "", *, exporter: SpanExporter | None = None
) -> bool:
    """Set up this process's tracer exporting to the OTLP endpoint, if one is configured (or
    to `exporter`, span by span, when given); whether tracing is on. Call once, at the
    process's start (idempotent)."""
    global _on
    url = endpoint(configured)
    if (url is None and exporter is None) or _on is not None:
        return _on is not None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    processor: SpanProcessor
    if exporter is not None:
        processor = SimpleSpanProcessor(exporter)
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=url))
    resource = Resource.create({"service.name": f"tavern-{service}", "service.namespace": "tavern"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("tavern", schema_url="https://opentelemetry.io/schemas/1.26.0")
    _on = _Tracing(service, provider, tracer, TraceContextTextMapPropagator())
    return True


def shutdown_tracing() -> None:
    """Export what is buffered and stop (at the process's end); tracing is off after."""
    global _on
    current, _on = _on, None
    if current is not None:
        current.provider.shutdown()


def enabled() -> bool:
    return _on is not None


# --- the trace context in headers ---------------------------------------------------------------


def inject(headers: dict[str, str]) -> dict[str, str]:
    """`headers` with the current span's context added (unchanged when tracing is off or no
    span is current)."""
    if _on is not None:
        _on.propagator.inject(headers)
    return headers


def with_context(headers: dict[str, str] | None) -> dict[str, str] | None:
    """A copy of `headers` with the current span's context added; `headers` itself (not
    copied) when tracing is off."""
    if _on is None:
        return headers
    return inject(dict(headers or {}))


def carried(headers: Mapping[str, str] | None) -> dict[str, str] | None:
    """Only the trace context of a message's headers, to keep beside what was read from it
    (None when tracing is off or the message carries none)."""
    if _on is None or not headers or TRACEPARENT not in headers:
        return None
    return {k: headers[k] for k in CARRIED if k in headers}


def extract(headers: Mapping[str, str] | None) -> Context | None:
    """The remote context `headers` carry (None when off or none is carried)."""
    if _on is None or not headers or TRACEPARENT not in headers:
        return None
    return _on.propagator.extract(headers)


def _span_context(headers: Mapping[str, str] | None) -> SpanContext | None:
    context = extract(headers)
    if context is None:
        return None
    from opentelemetry import trace

    found = trace.get_current_span(context).get_span_context()
    return found if found.is_valid else None


# --- spans --------------------------------------------------------------------------------------


def span(
    name: str,
    *,
    parent: Mapping[str, str] | None = None,
    links: Iterable[Mapping[str, str] | None] = (),
    kind: Kind = "internal",
    attributes: LazyAttributes = None,
) -> AbstractContextManager[None]:
    """A span around a block, current inside it, with `trace_id` bound in the log context.
    Its parent is the context `parent` headers carry when given (a message received: a span
    of another process), else the current span; `links` are more such contexts."""
    if _on is None:
        return _NOOP
    return _span(_on, name, parent, links, kind, attributes)


@contextlib.contextmanager
def _span(
    on: _Tracing,
    name: str,
    parent: Mapping[str, str] | None,
    links: Iterable[Mapping[str, str] | None],
    kind: Kind,
    attributes: LazyAttributes,
) -> Iterator[None]:
    from opentelemetry.context import Context
    from opentelemetry.trace import Link

    attributes = attributes() if callable(attributes) else attributes
    # A message received without a context starts a trace of its own (never the current one).
    context = None if parent is None else (extract(parent) or Context())
    linked = [Link(c) for c in map(_span_context, links) if c is not None]
    with (
        on.tracer.start_as_current_span(
            name, context=context, kind=_kind(kind), links=linked, attributes=attributes
        ) as current,
        structlog.contextvars.bound_contextvars(**_log_ids(current)),
    ):
        yield


def consumed(
    name: str, messages: Iterable[Mapping[str, str] | None], attributes: Attributes | None = None
) -> AbstractContextManager[None]:
    """Consumer spans around the processing of a batch of messages read from a stream.

    A span belongs to one trace, and a batch holds messages of many (one per turn). For each
    trace in the batch there is one span, a child of the first of its messages' creation
    context (the append that published it) and linked to the others: the processing joins the
    turn's trace, and every message's creation context is kept as a link, as OpenTelemetry's
    messaging conventions ask of batch processing. Messages without a context get no span.
    """
    if _on is None:
        return _NOOP
    return _consumed(_on, name, messages, attributes or {})


@contextlib.contextmanager
def _consumed(
    on: _Tracing, name: str, messages: Iterable[Mapping[str, str] | None], attributes: Attributes
) -> Iterator[None]:
    from opentelemetry import trace
    from opentelemetry.trace import Link, Status, StatusCode

    by_trace: dict[int, list[SpanContext]] = {}
    count = 0
    for headers in messages:
        count += 1
        found = _span_context(headers)
        if found is not None:
            by_trace.setdefault(found.trace_id, []).append(found)
    attrs = {**attributes, "messaging.batch.message_count": count}
    spans: list[Span] = [
        on.tracer.start_span(
            name,
            context=trace.set_span_in_context(trace.NonRecordingSpan(first)),
            kind=trace.SpanKind.CONSUMER,
            links=[Link(c) for c in rest],
            attributes=attrs,
        )
        for first, *rest in by_trace.values()
    ]
    try:
        yield
    except BaseException as exc:
        for s in spans:
            s.record_exception(exc)
            s.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        for s in spans:
            s.end()


def _kind(kind: Kind) -> Any:
    from opentelemetry.trace import SpanKind

    return SpanKind[kind.upper()]


def _log_ids(current: Span) -> dict[str, str]:
    found = current.get_span_context()
    return {"trace_id": format(found.trace_id, "032x"), "span_id": format(found.span_id, "016x")}
