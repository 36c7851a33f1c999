"""Session events carry the trace context of the append that wrote them (a single event and
every message of an atomic batch), and nothing when tracing is off."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tavern_runtime import tracing
from tavern_runtime.bus import NatsConnection
from tavern_runtime.sessionlog import STREAM, SessionLogWriter
from tests.integration.runtime.builders import said, step

pytestmark = pytest.mark.integration


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    assert tracing.configure_tracing("test", exporter=exporter)
    try:
        yield exporter
    finally:
        tracing.shutdown_tracing()


async def _traceparents(conn: NatsConnection, first: int, last: int) -> list[str | None]:
    found = []
    for seq in range(first, last + 1):
        msg = await conn.js.get_msg(STREAM, seq)
        found.append((msg.headers or {}).get(tracing.TRACEPARENT))
    return found


async def test_appended_events_carry_their_append_spans_context(
    provisioned: NatsConnection, spans: InMemorySpanExporter
) -> None:
    writer = SessionLogWriter(provisioned.nc)
    with tracing.span("turn"):
        await writer.append("s1", [step("s1")], expected_last=0)
        await writer.append("s1", [said("s1", str(i)) for i in range(3)], expected_last=1)
    appends = [s for s in spans.get_finished_spans() if s.name == "sessionlog.append"]
    (turn,) = [s for s in spans.get_finished_spans() if s.name == "turn"]
    assert len(appends) == 2
    assert turn.context is not None
    expected = []
    for append, count in zip(appends, (1, 3), strict=True):
        assert append.context is not None
        assert append.parent is not None
        assert append.parent.span_id == turn.context.span_id
        assert append.attributes is not None
        assert append.attributes["messaging.batch.message_count"] == count
        ids = f"{append.context.trace_id:032x}-{append.context.span_id:016x}"
        expected += [ids] * count
    carried = await _traceparents(provisioned, 1, 4)
    assert [c[3:-3] if c else None for c in carried] == expected  # 00-<trace>-<span>-<flags>


async def test_untraced_appends_carry_no_trace_header(provisioned: NatsConnection) -> None:
    assert not tracing.enabled()
    writer = SessionLogWriter(provisioned.nc)
    await writer.append("s1", [step("s1")], expected_last=0)
    await writer.append("s1", [said("s1", str(i)) for i in range(3)], expected_last=1)
    assert await _traceparents(provisioned, 1, 4) == [None] * 4
