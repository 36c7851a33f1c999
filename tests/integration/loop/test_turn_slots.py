"""Turn slots on the real engine: with one slot, a session whose model is still streaming holds
back no other session (its slot is let go while it waits), and both turns end; a turn still
waiting for a slot when the engine stops does not begin, and the next engine runs it."""

from __future__ import annotations

import asyncio

import pytest

from tavern_loop.options import LoopOptions
from tests.integration.loop.conftest import LoopBus, openai_router
from tests.integration.loop.providers.openai_server import OpenAIServer, text_stream
from tests.integration.loop.tools import ToolBench

pytestmark = pytest.mark.integration


async def test_a_turn_waiting_on_its_model_holds_back_no_other_session(bus: LoopBus) -> None:
    slow = [f"word{i} " for i in range(80)]  # about 4 s of streaming
    async with OpenAIServer() as server:
        server.enqueue(text_stream(slow, delay_s=0.05), text_stream(["quick answer"]))
        await bus.engine(options=LoopOptions(turn_slots=1), router=openai_router(server))
        await bus.say("s-slow", "tell me a long story")
        await bus.logged("s-slow", "assistant/chunk")  # its model is streaming
        await bus.say("s-quick", "hello")
        quick = await bus.turns_ended("s-quick", 1, timeout=10)
        assert not any(e.type == "turn/end" for e in await bus.log("s-slow")), (
            "the quick session's turn ended while the slow one's model still streamed"
        )
        assert quick[-1].payload.outcome == "completed"
        slow_log = await bus.turns_ended("s-slow", 1, timeout=15)
        assert slow_log[-1].payload.outcome == "completed"
        replies = [e for e in slow_log if e.type == "assistant/message"]
        assert replies[-1].payload.content == "".join(slow)


async def test_a_turn_waiting_for_a_slot_when_the_engine_stops_is_left_for_the_next(
    bus: LoopBus,
) -> None:
    bench = ToolBench()
    first = await bus.engine(options=LoopOptions(turn_slots=1), tools=bench.tools())
    await bus.say("s-busy", "call gate with {}")
    await asyncio.wait_for(bench.gate_entered.wait(), 10)  # the one slot is held by the tool
    await bus.say("s-waiting", "hello")
    await asyncio.sleep(0.5)
    assert await bus.log("s-waiting") == [], "a turn began without a slot"
    stopping = asyncio.create_task(first.stop(grace_s=5))
    await asyncio.sleep(0.2)
    bench.gate.set()  # the busy turn ends and lets its slot go while the engine stops
    await stopping
    bus.engines.remove(first)
    busy = await bus.turns_ended("s-busy", 1)
    assert busy[-1].payload.outcome == "completed"
    assert await bus.log("s-waiting") == [], "the waiting turn began while the engine stopped"
    await bus.engine(options=LoopOptions(turn_slots=1), tools=ToolBench().tools())
    waited = await bus.turns_ended("s-waiting", 1)
    assert waited[-1].payload.outcome == "completed"
    assert [e.payload.text for e in waited if e.type == "user/message"] == ["hello"]
