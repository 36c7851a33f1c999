"""The trace context in NATS headers: injected from the current span, extracted as the parent of
the receiving side's span, kept per trace across a consumed batch; nothing at all when off."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
import structlog
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tavern_runtime import tracing


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    assert tracing.configure_tracing("test", exporter=exporter)
    try:
        yield exporter
    finally:
        tracing.shutdown_tracing()


def _named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def test_endpoint_appends_the_traces_path_to_a_base_url() -> None:
    assert tracing.endpoint("http://collector:4318", {}) == "http://collector:4318/v1/traces"
    assert tracing.endpoint("http://c:4318/v1/traces/", {}) == "http://c:4318/v1/traces"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318/"}
    assert tracing.endpoint("", env) == "http://otel:4318/v1/traces"
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://otel:4318/custom"
    assert tracing.endpoint("", env) == "http://otel:4318/custom"  # used as given
    assert tracing.endpoint("http://mine:4318", env) == "http://mine:4318/v1/traces"


def test_no_endpoint_leaves_tracing_off() -> None:
    assert tracing.endpoint("", {}) is None
    assert tracing.endpoint("  ", {"OTEL_EXPORTER_OTLP_ENDPOINT": ""}) is None


def test_off_adds_no_header_and_imports_no_opentelemetry() -> None:
    script = (
        "import sys\n"
        "from tavern_runtime import tracing\n"
        "assert not tracing.configure_tracing('x', '')\n"
        "headers = {'Nats-Msg-Id': 'a'}\n"
        "with tracing.span('s', parent={'traceparent': 'x'}, attributes=lambda: 1/0):\n"
        "    assert tracing.inject(headers) == {'Nats-Msg-Id': 'a'}\n"
        "with tracing.consumed('c', [{'traceparent': 'x'}]):\n"
        "    pass\n"
        "assert tracing.carried({'traceparent': 'x'}) is None\n"
        "assert tracing.extract({'traceparent': 'x'}) is None\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "assert not loaded, loaded\n"
    )
    env = {"PATH": "/usr/bin:/bin"}  # no OTEL_* variable reaches it
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_injected_context_makes_the_receiving_span_a_child(
    spans: InMemorySpanExporter,
) -> None:
    headers = {"Nats-Msg-Id": "m1"}
    with tracing.span("publish", kind="producer"):
        tracing.inject(headers)
    assert headers["Nats-Msg-Id"] == "m1"
    assert headers[tracing.TRACEPARENT].startswith("00-")
    with tracing.span("handle", parent=headers, kind="server"):
        pass
    (publish,) = _named(spans, "publish")
    (handle,) = _named(spans, "handle")
    assert handle.parent is not None
    assert (handle.parent.trace_id, handle.parent.span_id) == _ids(publish)
    assert handle.kind is SpanKind.SERVER
    assert publish.kind is SpanKind.PRODUCER


def test_tracestate_travels_with_the_traceparent(spans: InMemorySpanExporter) -> None:
    incoming = {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "vendor=opaque",
    }
    assert tracing.carried({**incoming, "Tavern-Principal": "t"}) == incoming
    with tracing.span("handle", parent=incoming):
        forwarded = tracing.inject({})
    assert forwarded["tracestate"] == "vendor=opaque"
    assert forwarded["traceparent"].split("-")[1] == "0af7651916cd43dd8448eb211c80319c"
    (handle,) = _named(spans, "handle")
    assert _ids(handle)[0] == 0x0AF7651916CD43DD8448EB211C80319C


def test_a_message_without_a_valid_context_starts_a_trace_of_its_own(
    spans: InMemorySpanExporter,
) -> None:
    with tracing.span("outer"):
        with tracing.span("plain", parent={}):
            pass
        with tracing.span("garbled", parent={"traceparent": "00-zz-yy-01"}):
            pass
        with tracing.span("inner"):
            pass
    (outer,) = _named(spans, "outer")
    for name in ("plain", "garbled"):
        (found,) = _named(spans, name)
        assert found.parent is None
        assert _ids(found)[0] != _ids(outer)[0]
    (inner,) = _named(spans, "inner")
    assert inner.parent is not None
    assert inner.parent.span_id == _ids(outer)[1]


def test_links_name_the_other_inputs_contexts(spans: InMemorySpanExporter) -> None:
    contexts = []
    for name in ("first", "second"):
        with tracing.span(name):
            contexts.append(tracing.inject({}))
    with tracing.span("turn", parent=contexts[0], links=[contexts[1], None]):
        pass
    (turn,) = _named(spans, "turn")
    (first,) = _named(spans, "first")
    (second,) = _named(spans, "second")
    assert _ids(turn)[0] == _ids(first)[0]
    assert [(link.context.trace_id, link.context.span_id) for link in turn.links] == [_ids(second)]


def test_a_consumed_batch_gets_one_span_per_trace(spans: InMemorySpanExporter) -> None:
    published: dict[str, list[dict[str, str]]] = {"a": [], "b": []}
    for turn in ("a", "b"):
        with tracing.span(f"turn-{turn}"):
            for _ in range(2):
                with tracing.span(f"append-{turn}"):
                    published[turn].append(tracing.inject({}))
    batch = [published["a"][0], None, published["b"][0], published["a"][1], published["b"][1]]
    with tracing.consumed("ingest", batch, {"tavern.consumer": "c"}):
        pass
    ingests = _named(spans, "ingest")
    assert len(ingests) == 2
    for turn in ("a", "b"):
        appends = _named(spans, f"append-{turn}")
        (ingest,) = [s for s in ingests if _ids(s)[0] == _ids(appends[0])[0]]
        assert ingest.kind is SpanKind.CONSUMER
        assert ingest.parent is not None
        assert ingest.parent.span_id == _ids(appends[0])[1]
        assert [link.context.span_id for link in ingest.links] == [_ids(appends[1])[1]]
        assert ingest.attributes is not None
        assert ingest.attributes["messaging.batch.message_count"] == 5
        assert ingest.attributes["tavern.consumer"] == "c"


def test_a_failed_batch_marks_its_spans(spans: InMemorySpanExporter) -> None:
    with tracing.span("append"):
        headers = tracing.inject({})
    with pytest.raises(RuntimeError), tracing.consumed("ingest", [headers]):
        raise RuntimeError("refused")
    (ingest,) = _named(spans, "ingest")
    assert not ingest.status.is_ok
    assert ingest.events[0].name == "exception"


def test_log_lines_carry_the_trace_id_inside_a_span(spans: InMemorySpanExporter) -> None:
    with tracing.span("work"):
        bound = structlog.contextvars.get_contextvars()
    assert "trace_id" not in structlog.contextvars.get_contextvars()
    (work,) = _named(spans, "work")
    assert bound["trace_id"] == format(_ids(work)[0], "032x")
    assert bound["span_id"] == format(_ids(work)[1], "016x")


def test_lazy_attributes_are_made_only_when_on(spans: InMemorySpanExporter) -> None:
    with tracing.span("work", attributes=lambda: {"tavern.turn": 3}):
        pass
    (work,) = _named(spans, "work")
    assert work.attributes is not None
    assert work.attributes["tavern.turn"] == 3


def test_with_context_copies_only_when_on(spans: InMemorySpanExporter) -> None:
    mine = {"Tavern-Principal": "t"}
    with tracing.span("ask"):
        sent = tracing.with_context(mine)
    assert mine == {"Tavern-Principal": "t"}
    assert sent is not None
    assert sent["Tavern-Principal"] == "t"
    assert tracing.TRACEPARENT in sent
    tracing.shutdown_tracing()
    assert tracing.with_context(mine) is mine
    assert tracing.with_context(None) is None
