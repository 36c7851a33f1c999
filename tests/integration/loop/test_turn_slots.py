"""Turn slots on the real engine: with one slot, a session whose model is still streaming holds
back no other session (its slot is let go while it waits), and both turns end."""

from __future__ import annotations

import pytest

from tavern_loop.options import LoopOptions
from tests.integration.loop.conftest import LoopBus, openai_router
from tests.integration.loop.providers.openai_server import OpenAIServer, text_stream

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
