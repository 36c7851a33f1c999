"""The session-log writer and reader against a real nats-server (SESSIONS stream provisioned)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tavern_events.ids import new_id
from tavern_events.union import encode
from tavern_runtime.bus import NatsConnection
from tavern_runtime.errors import ConcurrencyConflict
from tavern_runtime.sessionlog import STREAM, Head, LogEntry, SessionLogReader, SessionLogWriter
from tests.integration.runtime.builders import said, step

pytestmark = pytest.mark.integration


async def session_count(conn: NatsConnection, session_id: str) -> int:
    info = await conn.js.stream_info(STREAM, subjects_filter=f"tavern.session.{session_id}.>")
    return sum((info.state.subjects or {}).values())


async def test_appends_get_gapless_seqs_from_one(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    last = 0
    for n in range(5):
        result = await writer.append("s1", [step("s1", n)], expected_last=last)
        last = result.head.log_seq
    events = await SessionLogReader(provisioned.js).events("s1")
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert last == 5


async def test_sessions_are_numbered_independently(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    await writer.append("a", [step("a")], expected_last=0)
    await writer.append("b", [step("b")], expected_last=0)
    result = await writer.append("a", [step("a")], expected_last=1)
    assert result.events[0].seq == 2
    assert (await writer.head("b")).log_seq == 1


async def test_head_of_an_empty_session_is_zero(provisioned: NatsConnection) -> None:
    assert await SessionLogWriter(provisioned.nc).head("nobody") == Head()


async def test_head_reports_log_seq_stream_seq_and_event(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    await writer.append("other", [step("other")], expected_last=0)
    appended = await writer.append("s1", [said("s1", "hi"), step("s1")], expected_last=0)
    head = await SessionLogWriter(provisioned.nc).head("s1")
    assert (head.log_seq, head.stream_seq) == (2, 3)
    assert head.event == appended.events[-1]
    assert head.event_id == appended.events[-1].id


async def test_append_rejects_stale_sequence(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    await writer.append("s1", [step("s1"), step("s1")], expected_last=0)
    with pytest.raises(ConcurrencyConflict) as caught:
        await writer.append("s1", [step("s1")], expected_last=1)
    assert caught.value.details == {"session_id": "s1", "expected": 1, "actual": 2}
    assert await session_count(provisioned, "s1") == 2


async def test_append_refused_by_server_when_cached_head_is_stale(
    provisioned: NatsConnection,
) -> None:
    mine, theirs = SessionLogWriter(provisioned.nc), SessionLogWriter(provisioned.nc)
    await mine.append("s1", [step("s1")], expected_last=0)
    await theirs.append("s1", [step("s1")], expected_last=1)
    with pytest.raises(ConcurrencyConflict):
        await mine.append("s1", [step("s1")], expected_last=1)  # cache still says 1: server refuses
    assert (await mine.head("s1")).log_seq == 2
    assert await session_count(provisioned, "s1") == 2


async def test_two_writers_with_one_expectation_exactly_one_wins(
    provisioned: NatsConnection,
) -> None:
    writers = [SessionLogWriter(provisioned.nc), SessionLogWriter(provisioned.nc)]
    results = await asyncio.gather(
        *(w.append("s1", [step("s1")], expected_last=0) for w in writers), return_exceptions=True
    )
    assert sorted(type(r).__name__ for r in results) == ["Appended", "ConcurrencyConflict"]
    assert await session_count(provisioned, "s1") == 1


async def test_racing_writers_each_win_distinct_positions(provisioned: NatsConnection) -> None:
    second = await _second_connection(provisioned)
    try:
        await asyncio.gather(
            _append_until_won(SessionLogWriter(provisioned.nc), "race", "a", 50),
            _append_until_won(SessionLogWriter(second.nc), "race", "b", 50),
        )
    finally:
        await second.close()
    events = await SessionLogReader(provisioned.js).events("race")
    assert [e.seq for e in events] == list(range(1, 101))
    assert len({e.id for e in events}) == 100
    texts = [e.payload.text for e in events]
    assert sorted(texts) == sorted([f"a{i}" for i in range(50)] + [f"b{i}" for i in range(50)])
    assert [t for t in texts if t[0] == "a"] == [f"a{i}" for i in range(50)]  # each in order


async def _second_connection(conn: NatsConnection) -> NatsConnection:
    from tavern_runtime.bus import connect
    from tavern_runtime.settings import TavernSettings

    url = conn.nc.connected_url
    assert url is not None
    return await connect(TavernSettings(nats_url=f"nats://{url.netloc}"), "racer-2")


async def _append_until_won(writer: SessionLogWriter, sid: str, who: str, wins: int) -> None:
    for i in range(wins):
        event = said(sid, f"{who}{i}")
        while True:
            head = await writer.head(sid)
            try:
                await writer.append(sid, [event], expected_last=head.log_seq)
                break
            except ConcurrencyConflict:
                continue  # lost this position: re-read the head and try the next one


async def test_encoded_payloads_are_sent_as_given_unless_numbered_here(
    provisioned: NatsConnection,
) -> None:
    writer = SessionLogWriter(provisioned.nc)
    numbered = said("s1", "as given").model_copy(update={"seq": 1})
    given = encode(numbered).replace(b"as given", b"AS GIVEN")  # visibly the caller's bytes
    await writer.append("s1", [numbered], expected_last=0, payloads=[given])
    unnumbered = said("s1", "numbered by the writer")  # seq 0: its payload would say 0
    await writer.append("s1", [unnumbered], expected_last=1, payloads=[encode(unnumbered)])
    stored = await SessionLogReader(provisioned.js).events("s1")
    assert [e.seq for e in stored] == [1, 2]
    assert [e.payload.text for e in stored] == ["AS GIVEN", "numbered by the writer"]


async def test_retried_append_after_success_is_a_no_op(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    events = [said("s1", "once"), step("s1")]
    first = await writer.append("s1", events, expected_last=0)
    again = await writer.append("s1", events, expected_last=0)
    fresh = await SessionLogWriter(provisioned.nc).append("s1", events, expected_last=0)
    assert not first.already
    assert again.already
    assert fresh.already
    assert again.events == first.events
    assert await session_count(provisioned, "s1") == 2


async def test_retry_after_lost_ack_finds_the_event_already_appended(
    provisioned: NatsConnection,
) -> None:
    writer = SessionLogWriter(provisioned.nc)
    await writer.append("s1", [step("s1")], expected_last=0)
    event = step("s1", 2).model_copy(update={"seq": 2})
    head = await writer.head("s1")
    # The first attempt reached the stream but its ack never came back:
    await provisioned.js.publish(
        "tavern.session.s1.step.start",
        encode(event),
        headers={
            "Nats-Msg-Id": event.id,
            "Nats-Expected-Last-Subject-Sequence": str(head.stream_seq),
            "Nats-Expected-Last-Subject-Sequence-Subject": "tavern.session.s1.>",
        },
    )
    result = await writer.append("s1", [event], expected_last=1)  # the writer's cache says 1
    assert result.already
    assert result.head.log_seq == 2
    assert await session_count(provisioned, "s1") == 2


async def test_batch_lands_whole(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    await writer.append("s1", [step("s1")], expected_last=0)
    result = await writer.append("s1", [said("s1", str(i)) for i in range(5)], expected_last=1)
    assert [e.seq for e in result.events] == [2, 3, 4, 5, 6]
    assert result.head.log_seq == 6
    events = await SessionLogReader(provisioned.js).events("s1")
    assert [e.seq for e in events] == [1, 2, 3, 4, 5, 6]


async def test_batch_refused_on_conflict_stores_nothing(provisioned: NatsConnection) -> None:
    mine, theirs = SessionLogWriter(provisioned.nc), SessionLogWriter(provisioned.nc)
    await mine.append("s1", [step("s1")], expected_last=0)
    await theirs.append("s1", [said("s1", "theirs")], expected_last=1)
    batch = [said("s1", "mine-1"), said("s1", "mine-2"), said("s1", "mine-3")]
    with pytest.raises(ConcurrencyConflict):
        await mine.append("s1", batch, expected_last=1)  # stale cache: the server refuses
    events = await SessionLogReader(provisioned.js).events("s1")
    assert [getattr(e.payload, "text", None) for e in events] == [None, "theirs"]


async def test_batch_with_one_bad_message_stores_none_of_it(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    first = await writer.append("s1", [step("s1")], expected_last=0)
    reused_id = said("s1", "dup").model_copy(update={"id": first.events[0].id})
    with pytest.raises(ConcurrencyConflict):
        await writer.append("s1", [said("s1", "ok"), reused_id, said("s1", "ok")], expected_last=1)
    assert await session_count(provisioned, "s1") == 1
    assert (await writer.append("s1", [step("s1")], expected_last=1)).head.log_seq == 2


async def test_replay_from_log_seq(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    await writer.append("s1", [said("s1", str(i)) for i in range(10)], expected_last=0)
    entries = [e async for e in SessionLogReader(provisioned.js).session("s1", from_seq=4)]
    assert [e.event.seq for e in entries] == list(range(4, 11))
    assert [e.stream_seq for e in entries] == list(range(4, 11))


async def test_replay_from_time(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    await writer.append("s1", [said("s1", "old")], expected_last=0)
    await writer.append("s2", [said("s2", "old")], expected_last=0)
    since = datetime.now(UTC)
    await writer.append("s1", [said("s1", "new")], expected_last=1)
    await writer.append("s2", [said("s2", "new")], expected_last=1)
    reader = SessionLogReader(provisioned.js)
    assert [e.payload.text for e in await _events(reader.session("s1", since=since))] == ["new"]
    everything = await _events(reader.all_sessions(since=since))
    assert [(e.session_id, e.seq) for e in everything] == [("s1", 2), ("s2", 2)]


async def test_replay_all_sessions_from_stream_seq(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    for sid in ("a", "b", "c"):
        await writer.append(sid, [step(sid), step(sid)], expected_last=0)
    entries = [e async for e in SessionLogReader(provisioned.js).all_sessions(from_stream_seq=4)]
    assert [e.stream_seq for e in entries] == [4, 5, 6]
    assert [(e.event.session_id, e.event.seq) for e in entries] == [("b", 2), ("c", 1), ("c", 2)]


async def test_replay_of_empty_session_returns_at_once(provisioned: NatsConnection) -> None:
    await SessionLogWriter(provisioned.nc).append("other", [step("other")], expected_last=0)
    reader = SessionLogReader(provisioned.js, idle_timeout=30)
    started = time.monotonic()
    assert await reader.events("nobody") == []
    assert [e async for e in reader.session("other", from_stream_seq=2)] == []
    assert time.monotonic() - started < 2


async def test_reader_skips_and_counts_unknown_types_and_newer_versions(
    provisioned: NatsConnection,
) -> None:
    writer = SessionLogWriter(provisioned.nc)
    await writer.append("s1", [step("s1")], expected_last=0)
    future = {"id": new_id(), "type": "hologram/shown", "v": 1, "session_id": "s1", "seq": 2}
    newer = {**json.loads(encode(step("s1"))), "v": 99, "seq": 3}
    await provisioned.js.publish("tavern.session.s1.hologram.shown", json.dumps(future).encode())
    await provisioned.js.publish("tavern.session.s1.step.start", json.dumps(newer).encode())
    appended = await writer.append("s1", [step("s1")], expected_last=3)  # unknown tail is fine
    reader = SessionLogReader(provisioned.js)
    events = await reader.events("s1")
    assert [e.seq for e in events] == [1, 4]
    assert appended.head.log_seq == 4
    assert reader.skipped.by_reason == {"unknown_type": 1, "newer_version": 1}
    assert reader.skipped.by_type == {"hologram/shown": 1, "step/start": 1}
    assert reader.malformed == []


async def test_reader_reports_malformed_messages_and_goes_on(provisioned: NatsConnection) -> None:
    writer = SessionLogWriter(provisioned.nc)
    await writer.append("s1", [step("s1")], expected_last=0)
    await provisioned.js.publish("tavern.session.s1.step.start", b"not json")
    foreign = json.loads(encode(step("s9")))
    await provisioned.js.publish("tavern.session.s1.step.start", json.dumps(foreign).encode())
    after = step("s1").model_copy(update={"seq": 4})
    await provisioned.js.publish("tavern.session.s1.step.start", encode(after))
    reader = SessionLogReader(provisioned.js)
    events = await reader.events("s1")
    assert [e.seq for e in events] == [1, 4]
    assert [(m.stream_seq, m.subject) for m in reader.malformed] == [
        (2, "tavern.session.s1.step.start"),
        (3, "tavern.session.s1.step.start"),
    ]
    assert "not JSON" in reader.malformed[0].error


async def _events(entries: AsyncIterator[LogEntry]) -> list[Any]:
    return [entry.event async for entry in entries]
