"""A session resumed on the replica that let it go reads only what was stored since, and what
another replica appended meanwhile is part of its history."""

from __future__ import annotations

from typing import Any

import pytest

from tavern_loop import runner
from tavern_loop.options import LoopOptions
from tavern_runtime.sessionlog import SessionLogReader
from tests.integration.loop.checks import RecordingProvider, check_requests, recording_router
from tests.integration.loop.conftest import LoopBus
from tests.support import eventually

pytestmark = pytest.mark.integration


def spy_reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Record every (session, after_stream_seq) a session runner reads its log from."""
    reads: list[tuple[str, int]] = []

    class Spied(SessionLogReader):
        async def read(self, session_id: str, **kwargs: Any) -> Any:
            reads.append((session_id, kwargs.get("after_stream_seq", 0)))
            return await super().read(session_id, **kwargs)

    monkeypatch.setattr(runner, "SessionLogReader", Spied)
    return reads


async def test_a_resumed_session_reads_only_what_was_stored_after_its_kept_log(
    bus: LoopBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = spy_reads(monkeypatch)
    model = RecordingProvider()
    engine = await bus.engine(LoopOptions(idle_hold_s=0.05), router=recording_router(model))
    await bus.say("k1", "first words")
    await bus.turns_ended("k1", 1)
    await eventually(lambda: "k1" not in engine.runners, timeout=10)
    kept = engine.deps.logs.take("k1")
    assert kept is not None
    assert [e.id for e in kept.events] == [e.id for e in await bus.log("k1")]
    engine.deps.logs.keep("k1", kept.events, kept.stream_seq)

    await bus.say("k1", "second words")
    events = await bus.turns_ended("k1", 2)
    assert reads == [("k1", 0), ("k1", kept.stream_seq)]
    check_requests(events, model.chat())  # the second request carries the first turn


async def test_what_another_replica_appended_meanwhile_joins_the_kept_log(
    bus: LoopBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = RecordingProvider()
    options = LoopOptions(idle_hold_s=0.05)
    first = await bus.engine(options, router=recording_router(model))
    await bus.say("k2", "hello from the first replica")
    await bus.turns_ended("k2", 1)
    await eventually(lambda: "k2" not in first.runners, timeout=10)
    assert first.deps.logs.take("k2") is not None
    # As if the first replica had let go after turn 1 while a second one ran turn 2: keep the
    # log of turn 1 only, with where its last message is stored.
    turn_one = [entry async for entry in SessionLogReader(bus.js).session("k2")]
    await bus.say("k2", "hello again")
    await bus.turns_ended("k2", 2)
    await eventually(lambda: "k2" not in first.runners, timeout=10)
    first.deps.logs.take("k2")
    first.deps.logs.keep("k2", [e.event for e in turn_one], turn_one[-1].stream_seq)

    reads = spy_reads(monkeypatch)
    await bus.say("k2", "and once more")
    events = await bus.turns_ended("k2", 3)
    assert reads == [("k2", turn_one[-1].stream_seq)]
    check_requests(events, model.chat())
    await eventually(lambda: "k2" not in first.runners, timeout=10)
    kept = first.deps.logs.take("k2")
    assert kept is not None
    assert [e.id for e in kept.events] == [e.id for e in events]
