"""Pipelined appends (fast-ingest batches) against a real nats-server: a turn's events go
without waiting for each other, the first conditional, and whatever stops the batch leaves
a prefix that the next call completes, never a gap and never a doubled event."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import nats
import pytest

from tavern_events import streams
from tavern_events.envelope import SessionEvent
from tavern_runtime.bus import NatsConnection
from tavern_runtime.embedded import free_port, nats_server_binary
from tavern_runtime.errors import ConcurrencyConflict, PermanentError, TransientError
from tavern_runtime.provision import provision, stream_config
from tavern_runtime.sessionlog import (
    STREAM,
    Head,
    SessionLogReader,
    SessionLogWriter,
    assign_seqs,
    landed_prefix,
)
from tests.integration.runtime.builders import said, step
from tests.support import eventually

pytestmark = pytest.mark.integration


async def logged(conn: NatsConnection, session_id: str) -> list[SessionEvent]:
    return await SessionLogReader(conn.js).events(session_id)


async def stored(conn: NatsConnection, session_id: str) -> int:
    info = await conn.js.stream_info(STREAM, subjects_filter=f"tavern.session.{session_id}.>")
    return sum((info.state.subjects or {}).values())


async def test_a_pipelined_append_lands_every_event_in_order(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    assert writer.pipelines
    events = [step("s1", n) for n in range(7)]
    appended = await writer.append("s1", events, expected_last=0, pipelined=True)
    assert not appended.already
    found = await logged(provisioned, "s1")
    assert [e.id for e in found] == [e.id for e in events]
    assert [e.seq for e in found] == list(range(1, 8))
    assert appended.head == await SessionLogWriter(provisioned.nc).head("s1")


async def test_more_than_one_batch_of_events_lands_whole(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    events = [step("s1", n) for n in range(250)]
    await writer.append("s1", events, expected_last=0, pipelined=True)
    found = await logged(provisioned, "s1")
    assert [e.id for e in found] == [e.id for e in events]


async def test_a_stale_expectation_stores_none_of_them(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    await writer.append("s1", [step("s1"), step("s1")], expected_last=0, pipelined=True)
    other = SessionLogWriter(provisioned.nc)  # its cache still thinks the log is empty
    other.heads.put("s1", replace(await other.head("s1"), log_seq=0, stream_seq=0))
    with pytest.raises(ConcurrencyConflict):
        await other.append("s1", [step("s1") for _ in range(5)], expected_last=0, pipelined=True)
    assert await stored(provisioned, "s1") == 2


async def test_a_landed_prefix_is_completed_not_doubled(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    events = [said("s1", f"line {n}") for n in range(6)]
    first = await writer.append("s1", events[:3], expected_last=0, pipelined=True)
    retried = SessionLogWriter(provisioned.nc)  # a retry that does not know what landed
    appended = await retried.append("s1", first.events + tuple(events[3:]), expected_last=0)
    assert not appended.already
    found = await logged(provisioned, "s1")
    assert [e.id for e in found] == [e.id for e in events]
    again = await retried.append("s1", appended.events, expected_last=0, pipelined=True)
    assert again.already
    assert await stored(provisioned, "s1") == 6


async def test_a_failure_midway_leaves_a_prefix_and_says_why(conn: NatsConnection) -> None:
    small = replace(streams.SESSIONS, extra={**streams.SESSIONS.extra, "max_msg_size": 2048})
    assert (await provision(conn.js, stream_specs=(small,), buckets=())).ok
    writer = SessionLogWriter(conn.nc)
    events = [said("s1", "short"), said("s1", "short"), said("s1", "x" * 4096), said("s1", "y")]
    with pytest.raises(PermanentError):
        await writer.append("s1", events, expected_last=0, pipelined=True)
    found = await logged(conn, "s1")
    assert [e.id for e in found] == [e.id for e in events[:2]]
    assert [e.seq for e in found] == [1, 2]


async def test_a_stream_without_fast_batches_gets_appends_as_before(conn: NatsConnection) -> None:
    plain = replace(streams.SESSIONS, extra={})
    assert (await provision(conn.js, stream_specs=(plain,), buckets=())).ok
    writer = SessionLogWriter(conn.nc)
    events = [step("s1", n) for n in range(4)]
    await writer.append("s1", events, expected_last=0, pipelined=True)
    assert not writer.pipelines
    assert [e.id for e in await logged(conn, "s1")] == [e.id for e in events]


async def test_batches_of_two_connections_never_share_an_id(
    provisioned: NatsConnection, nats_url: str
) -> None:
    """A stream knows its batches in flight by id alone: another connection's batch with a
    short id (here one begun and never ended) must not swallow or cut ours."""
    other = await nats.connect(nats_url)
    try:
        for short_id in ("1", "2"):
            held_open = f"{other.new_inbox()}.{short_id}.100.fail.1.0.$FI"
            await other.publish("tavern.session.other.step.start", b"{}", reply=held_open)
        await other.flush()
        first, second = SessionLogWriter(provisioned.nc), SessionLogWriter(other)
        one = [step("s1", n) for n in range(3)]
        two = [step("s2", n) for n in range(3)]
        await asyncio.gather(
            first.append("s1", one, expected_last=0, pipelined=True),
            second.append("s2", two, expected_last=0, pipelined=True),
        )
        assert [e.id for e in await logged(provisioned, "s1")] == [e.id for e in one]
        assert [e.id for e in await logged(provisioned, "s2")] == [e.id for e in two]
    finally:
        await other.close()


def test_landed_prefix_counts_our_events_at_the_head() -> None:
    events = assign_seqs("s1", [step("s1", n) for n in range(4)], 10)
    heads = [Head(e.seq, 100 + i, e.id, e) for i, e in enumerate(events)]
    assert [landed_prefix(head, events) for head in heads] == [1, 2, 3, 4]
    assert landed_prefix(Head(10, 99, "someone-else"), events) == 0
    assert landed_prefix(Head(12, 99, "someone-else"), events) == 0


async def test_too_many_batches_in_flight_is_back_pressure(tmp_path: Path) -> None:
    """A server at its limit of batches in flight refuses a new one whole: try again later."""
    port = free_port()
    config = tmp_path / "nats.conf"
    config.write_text(
        f'listen: "127.0.0.1:{port}"\n'
        f'jetstream {{\n  store_dir: "{tmp_path / "js"}"\n'
        '  limits { batch { max_inflight_per_stream: 1, timeout: "3s" } }\n}\n'
    )
    server = await asyncio.create_subprocess_exec(nats_server_binary(), "-c", str(config))
    try:
        nc = await eventually(lambda: nats.connect(f"nats://127.0.0.1:{port}"), timeout=10)
        js = nc.jetstream()
        await js.add_stream(stream_config(streams.SESSIONS))
        held_open = f"{nc.new_inbox()}.open.100.fail.1.0.$FI"  # a batch begun, never ended
        await nc.publish("tavern.session.other.step.start", b"{}", reply=held_open)
        await nc.flush()
        writer = SessionLogWriter(nc)
        with pytest.raises(TransientError) as caught:
            await writer.append(
                "s1", [step("s1", n) for n in range(3)], expected_last=0, pipelined=True
            )
        assert getattr(caught.value.__cause__, "err_code", None) == 10211
        assert await SessionLogReader(js).events("s1") == []
        await nc.close()
    finally:
        server.terminate()
        await asyncio.wait_for(server.wait(), 10)
