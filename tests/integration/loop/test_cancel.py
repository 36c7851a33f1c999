"""Cancellation ends the current turn only: mid-stream (real HTTP stream) and mid-tools."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.integration.loop.checks import (
    RecordingProvider,
    check_requests,
    claims,
    of_type,
    one,
    recording_router,
)
from tests.integration.loop.conftest import LoopBus, openai_router, sent, types
from tests.integration.loop.providers.openai_server import OpenAIServer, text_stream
from tests.integration.loop.tools import ToolBench
from tests.support import eventually

pytestmark = pytest.mark.integration


async def test_cancel_mid_stream_keeps_the_partial_answer_and_closes_the_stream(
    bus: LoopBus,
) -> None:
    words = [f"word{i} " for i in range(60)]
    async with OpenAIServer() as server:
        server.enqueue(text_stream(words, delay_s=0.05), text_stream(["fine, ", "stopping."]))
        await bus.engine(router=openai_router(server))
        await bus.say("s1", "tell me a long story")
        await bus.logged("s1", "assistant/chunk")
        await bus.cancel("s1")
        events = await bus.turns_ended("s1", 1)
        await eventually(lambda: server.disconnects == 1, timeout=5)
        ending = types(events, lambda t: t in ("assistant/chunk", "turn/stopping"))
        assert ending[-4:] == [
            "agent/request",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
        partial = one(events, "assistant/message")
        streamed = "".join(c.payload.delta for c in of_type(events, "assistant/chunk"))
        assert partial.payload.partial is True
        assert partial.payload.finish_reason == "cancelled"
        assert partial.payload.content == streamed
        assert "".join(words).startswith(streamed)
        assert 0 < len(streamed) < len("".join(words)), "the stream stopped part-way"
        assert one(events, "step/end").payload.finish_reason == "cancelled"
        end = events[-1]
        assert (end.payload.outcome, end.payload.steps) == ("cancelled", 1)

        next_id = await bus.say("s1", "never mind")
        events = await bus.turns_ended("s1", 2)
        assert events[-1].payload.outcome == "completed"
        assert next_id in [c[0] for c in claims(events)]
        assert of_type(events, "assistant/message")[-1].payload.content == "fine, stopping."
        check_requests(events, sent(server))
        assert len(server.requests) == 2


async def test_cancel_during_tools_aborts_the_running_call_and_skips_the_rest(
    bus: LoopBus,
) -> None:
    bench = ToolBench()
    await bus.engine(tools=bench.tools())
    await bus.say("s1", 'call gate with {} call echo with {"text": "later"}')
    await asyncio.wait_for(bench.gate_entered.wait(), 10)
    await bus.cancel("s1")
    events = await bus.turns_ended("s1", 1)
    assert bench.gate_cancelled.is_set(), "the running tool saw the cancel"
    tools = [e for e in events if e.type.startswith("tool/")]
    assert [(e.type, e.payload.name) for e in tools] == [
        ("tool/call", "gate"),
        ("tool/result", "gate"),
        ("tool/call", "echo"),
        ("tool/result", "echo"),
    ]
    gate, echo = tools[1].payload, tools[3].payload
    assert (gate.ok, gate.synthetic, gate.error.code) == (False, False, "CANCELLED")
    assert (echo.ok, echo.synthetic, echo.error.code) == (False, True, "ABORTED_BEFORE_DISPATCH")
    assert json.loads(tools[2].payload.arguments) == {"text": "later"}
    assert one(events, "step/end").payload.finish_reason == "cancelled"
    assert (events[-1].payload.outcome, events[-1].payload.steps) == ("cancelled", 1)
    assert "echo: later" not in [e.payload.content for e in of_type(events, "tool/result")]


async def test_a_cancel_queued_behind_a_message_cancels_that_message_turn(bus: LoopBus) -> None:
    model = RecordingProvider()
    first_id = await bus.say("s1", "a message the user regrets")
    await bus.cancel("s1")  # both are waiting when the session is picked up
    await bus.engine(router=recording_router(model))
    events = await bus.turns_ended("s1", 1)
    assert [c[2] for c in claims(events)] == ["turn/start", "turn/start"]
    assert types(events, lambda t: t == "turn/stopping") == [
        "session/created",
        "turn/start",
        "step/start",
        "user/message",
        "step/end",
        "turn/end",
    ]
    assert one(events, "user/message").payload.input_id == first_id, "what was said stays"
    assert one(events, "step/end").payload.finish_reason == "cancelled"
    assert (events[-1].payload.outcome, events[-1].payload.steps) == ("cancelled", 1)
    assert model.requests == [], "no model request for a cancelled turn"

    await bus.say("s1", "forget it")
    events = await bus.turns_ended("s1", 2)
    assert events[-1].payload.outcome == "completed"
    check_requests(events, model.chat())


async def test_a_cancel_sent_before_a_message_does_not_cancel_its_turn(bus: LoopBus) -> None:
    await bus.cancel("s1")  # late for an earlier turn: stale by the time the message comes
    await bus.say("s1", "hello again")
    await bus.engine()
    events = await bus.turns_ended("s1", 1)
    assert [c[2] for c in claims(events)] == ["turn/start", "turn/start"]
    assert events[-1].payload.outcome == "completed"
