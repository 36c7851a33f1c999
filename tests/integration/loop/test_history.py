"""`derive_messages` of the replayed log is exactly what the model was sent, across everything
a session can go through: tools, reminders, rejection, spill, mid-turn input, compaction."""

from __future__ import annotations

import asyncio
import json

import pytest

from tavern_loop.domain.history import derive_messages
from tavern_loop.domain.pruner import PrunerConfig
from tavern_loop.options import CompactionOptions, LoopOptions
from tests.integration.loop.checks import (
    RecordingProvider,
    check_requests,
    of_type,
    recording_router,
)
from tests.integration.loop.conftest import LoopBus
from tests.integration.loop.tools import ToolBench

pytestmark = pytest.mark.integration


async def test_derive_messages_of_the_replayed_log_is_what_the_model_was_sent(
    bus: LoopBus,
) -> None:
    bench, model = ToolBench(big_chars=12_000), RecordingProvider()
    options = LoopOptions(
        max_input_chars=2_000,
        spill_max_inline_bytes=4_000,
        compaction=CompactionOptions(pruner=PrunerConfig(1_000, 300, 100)),
    )
    await bus.engine(options=options, router=recording_router(model), tools=bench.tools())
    same = json.dumps({"tag": "t", "ms": 1})
    turns = 0

    async def say(text: str) -> None:
        nonlocal turns
        turns += 1
        await bus.say("s1", text)
        await bus.turns_ended("s1", turns)

    await say('call echo with {"text": "one"}')
    await say(" ".join([f"call sleepy with {same}"] * 3))
    await say("z" * 2_001)
    await say("call big with {}")
    await bus.say("s1", "call gate with {}")
    await asyncio.wait_for(bench.gate_entered.wait(), 10)
    await bus.say("s1", "joined mid-turn")
    bench.gate.set()
    turns += 1
    await bus.turns_ended("s1", turns)
    await bus.command("s1", "compact")
    turns += 1
    await bus.turns_ended("s1", turns)
    await say("after the compaction")

    events = await bus.log("s1")  # a fresh replay from the stream
    outcomes = [e.payload.outcome for e in of_type(events, "turn/end")]
    assert (
        outcomes
        == ["completed", "completed", "rejected", "completed", "completed"] + ["completed"] * 2
    )
    compacted = [e.payload.strategy for e in of_type(events, "context/compacted")]
    assert compacted == ["prune", "summary"]
    assert any(e.source == "plugin:repeat-tool-reminder" for e in of_type(events, "user/message"))
    assert any(e.payload.spill for e in of_type(events, "tool/result"))
    assert any(e.payload.claimed for e in of_type(events, "step/start"))
    check_requests(events, model.chat())
    chat = [r for r in model.requests if r.route == "chat"]
    sent_tools = [tuple(t["function"]["name"] for t in r.tools) for r in chat]
    assert sent_tools == [e.payload.tool_names for e in of_type(events, "agent/request")]
    assert derive_messages(events) == derive_messages(await bus.log("s1")), (
        "same log, same messages"
    )
