"""The held log writes staged events behind the turn, in order, and reports failures at the
next flush (real nats-server)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from tavern_events.envelope import SessionEvent
from tavern_events.ids import new_id
from tavern_events.message import UserMessage
from tavern_loop.sessionlog import HeldLog
from tavern_runtime.errors import ConcurrencyConflict
from tavern_runtime.sessionlog import Appended, SessionLogReader, SessionLogWriter
from tests.integration.loop.conftest import LoopBus
from tests.integration.runtime.builders import said, step
from tests.support import eventually

pytestmark = pytest.mark.integration


def session() -> str:
    return f"held-{new_id()[-12:]}"


async def durable(bus: LoopBus, session_id: str) -> list[str]:
    events = await SessionLogReader(bus.js).events(session_id)
    return [e.payload.text for e in events if isinstance(e, UserMessage)]


async def test_staged_events_become_durable_without_a_flush(bus: LoopBus) -> None:
    sid = session()
    held = HeldLog(sid, SessionLogWriter(bus.nc), [])
    held.stage(said(sid, "one"), said(sid, "two"))
    held.stage(said(sid, "three"))

    async def landed() -> list[str] | None:
        texts = await durable(bus, sid)
        return texts if len(texts) == 3 else None

    assert await eventually(landed, timeout=5) == ["one", "two", "three"]
    assert held.durable_seq == 3
    await held.close()


async def test_flush_waits_for_everything_staged_before_it(bus: LoopBus) -> None:
    sid = session()
    held = HeldLog(sid, SessionLogWriter(bus.nc), [])
    for n in range(12):
        held.stage(said(sid, f"m{n}"))
        if n % 5 == 0:
            await asyncio.sleep(0)  # let the writer start mid-way
    await held.flush()
    assert await durable(bus, sid) == [f"m{n}" for n in range(12)]
    assert held.durable_seq == 12
    events = await SessionLogReader(bus.js).events(sid)
    assert [e.seq for e in events] == list(range(1, 13))


async def test_a_conflict_behind_the_turn_is_raised_by_the_next_flush(bus: LoopBus) -> None:
    sid = session()
    rival = SessionLogWriter(bus.nc)
    await rival.append(sid, [step(sid)], expected_last=0)  # another writer moved the log
    held = HeldLog(sid, SessionLogWriter(bus.nc), [])  # believes the log is empty
    held.stage(said(sid, "mine"))

    async def failed() -> bool | None:
        return True if held.failure is not None else None

    assert await eventually(failed, timeout=5)
    held.stage(said(sid, "after"))  # no new write starts after a failure
    with pytest.raises(ConcurrencyConflict):
        await held.flush()
    events = await SessionLogReader(bus.js).events(sid)
    assert [e.type for e in events] == ["step/start"]  # nothing of ours landed
    with pytest.raises(ConcurrencyConflict):  # a retry meets the same log
        await held.flush()


async def test_close_stops_the_writer_and_keeps_what_is_staged(bus: LoopBus) -> None:
    sid = session()
    held = HeldLog(sid, SessionLogWriter(bus.nc), [])
    held.stage(said(sid, "kept"))
    await held.close()  # before the writer got to run
    assert await durable(bus, sid) == []
    assert held.messages()[-1]["content"] == "kept"
    await held.flush()
    assert await durable(bus, sid) == ["kept"]


async def test_without_write_behind_events_wait_for_the_flush(bus: LoopBus) -> None:
    sid = session()
    held = HeldLog(sid, SessionLogWriter(bus.nc), [], write_behind=False)
    held.stage(said(sid, "later"))
    await asyncio.sleep(0.2)
    assert await durable(bus, sid) == []
    await held.flush()
    assert await durable(bus, sid) == ["later"]


def counted(writer: SessionLogWriter) -> list[tuple[int, bool]]:
    """Record each append the writer is asked for: how many events, and whether pipelined."""
    calls: list[tuple[int, bool]] = []
    append = writer.append

    async def counting(
        session_id: str,
        events: Sequence[SessionEvent],
        *,
        expected_last: int,
        payloads: Sequence[bytes] | None = None,
        pipelined: bool = False,
    ) -> Appended:
        calls.append((len(events), pipelined))
        return await append(
            session_id, events, expected_last=expected_last, payloads=payloads, pipelined=pipelined
        )

    writer.append = counting  # type: ignore[method-assign]
    return calls


async def staged_in_two_rounds(held: HeldLog, sid: str) -> None:
    held.stage(said(sid, "first"))
    await asyncio.sleep(0)  # the writer takes "first" alone and waits for its ack
    held.stage(*(said(sid, f"then {n}") for n in range(4)))  # staged meanwhile: one round trip
    await held.flush()


async def test_with_replicated_streams_events_staged_together_append_as_one_batch(
    bus: LoopBus,
) -> None:
    sid = session()
    writer = SessionLogWriter(bus.nc, replicas=3)
    calls = counted(writer)
    await staged_in_two_rounds(HeldLog(sid, writer, []), sid)
    assert calls == [(1, False), (4, False)]  # a replicated stream: an atomic batch
    assert await durable(bus, sid) == ["first", *(f"then {n}" for n in range(4))]
    events = await SessionLogReader(bus.js).events(sid)
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("fresh", [True, False])
async def test_with_one_replica_events_staged_together_go_pipelined(
    bus: LoopBus, fresh: bool
) -> None:
    """...while the holder's lease is fresh; otherwise one conditional append each."""
    sid = session()
    writer = SessionLogWriter(bus.nc)
    calls = counted(writer)
    await staged_in_two_rounds(HeldLog(sid, writer, [], may_pipeline=lambda: fresh), sid)
    assert calls == ([(1, True), (4, True)] if fresh else [(1, False)] * 5)
    assert await durable(bus, sid) == ["first", *(f"then {n}" for n in range(4))]
    events = await SessionLogReader(bus.js).events(sid)
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
