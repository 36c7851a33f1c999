from __future__ import annotations

import json

import pytest
from nats.aio.msg import Msg

from tests.integration.loop.conftest import LoopBus

pytestmark = pytest.mark.integration


async def test_pending_style_approvals_are_shown_at_the_first_step(bus: LoopBus) -> None:
    asked: list[str] = []

    async def consolidator(msg: Msg) -> None:  # answers as the consolidator's RPC does
        asked.append(json.loads(msg.data)["session_id"])
        reply = {"requests": [{"candidate_id": "c1", "reason": "prefers short answers"}]}
        await msg.respond(json.dumps(reply).encode())

    await bus.nc.subscribe("tavern.rpc.consolidator.approvals.next", cb=consolidator)
    await bus.engine()
    await bus.say("s1", "hello")
    events = await bus.turns_ended("s1", 1)
    shown = [e for e in events if e.type == "user/message" and e.form == "approval"]
    assert asked == ["s1"]
    assert len(shown) == 1
    assert shown[0].source == "plugin:consolidator"
    assert "- c1: prefers short answers" in shown[0].payload.text


async def test_no_consolidator_means_no_approval_message(bus: LoopBus) -> None:
    await bus.engine()
    await bus.say("s2", "hello")
    events = await bus.turns_ended("s2", 1)
    assert not [e for e in events if e.form == "approval"]
    assert events[-1].payload.outcome == "completed"
