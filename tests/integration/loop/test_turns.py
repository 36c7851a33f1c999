from __future__ import annotations

import pytest

from tavern_loop.domain.history import derive_messages
from tests.integration.loop.conftest import LoopBus, types

pytestmark = pytest.mark.integration

NOT_CHUNK = lambda t: t == "assistant/chunk"  # noqa: E731


async def test_a_plain_turn_appends_events_in_order(bus: LoopBus) -> None:
    await bus.engine()
    await bus.say("s1", "hello there")
    events = await bus.turns_ended("s1", 1)
    assert types(events, NOT_CHUNK) == [
        "session/created",
        "turn/start",
        "step/start",
        "user/message",
        "agent/request",
        "assistant/message",
        "step/end",
        "turn/stopping",
        "turn/end",
    ]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    end = events[-1]
    assert end.payload.outcome == "completed"
    assert end.turn == 1
    request = next(e for e in events if e.type == "agent/request")
    assert request.payload.offline is True
    assert "assistant/chunk" in types(events)
