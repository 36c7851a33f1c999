"""The loop where DSH says how it behaves: a reply cut at the token limit, follow-ups sent
while idle, and what every compaction request answers (through the public subjects)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from tavern_events.context import ContextCompactionSkipped
from tavern_loop.dispatch import claimed_in_log
from tests.integration.loop.checks import (
    RecordingProvider,
    check_requests,
    claims,
    in_turn,
    of_type,
    one,
    recording_router,
)
from tests.integration.loop.conftest import LoopBus, openai_router, sent, types
from tests.integration.loop.providers.openai_server import (
    USAGE,
    OpenAIServer,
    Scripted,
    chunk,
    text_stream,
)
from tests.integration.loop.tools import ToolBench

pytestmark = pytest.mark.integration


def cut_tool_call_stream() -> Scripted:
    """A reply that hits max_tokens in the middle of a tool call's arguments."""
    head = {"index": 0, "id": "call_1", "type": "function"}
    events = [
        chunk({"role": "assistant", "content": "Let me look that up. "}),
        chunk({"tool_calls": [{**head, "function": {"name": "echo", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"text": "pi'}}]}),
        chunk(finish_reason="length"),
        chunk(usage=USAGE),
        "[DONE]",
    ]
    return Scripted(events=tuple(events))


async def test_a_reply_cut_at_max_tokens_runs_none_of_its_tool_calls(bus: LoopBus) -> None:
    bench = ToolBench()
    async with OpenAIServer() as server:
        server.enqueue(cut_tool_call_stream())
        await bus.engine(router=openai_router(server), tools=bench.tools())
        await bus.say("s1", "what does echo say?")
        events = await bus.turns_ended("s1", 1)
    answer = one(events, "assistant/message").payload
    assert (answer.finish_reason, answer.tool_calls) == ("length", ())
    assert answer.content == "Let me look that up. "
    assert of_type(events, "tool/call") == []
    assert of_type(events, "tool/result") == []
    assert len(server.requests) == 1, "no request follows a cut reply"
    stopping = one(events, "turn/stopping").payload
    assert stopping.detail is not None
    assert stopping.detail.startswith("max_tokens")
    end = events[-1].payload
    assert (end.outcome, end.steps, end.max_tokens) == ("completed", 1, True)
    assert one(events, "step/end").payload.finish_reason == "length"
    check_requests(events, sent(server))


async def test_a_turn_that_was_not_cut_does_not_say_max_tokens(bus: LoopBus) -> None:
    await bus.engine()
    await bus.say("s1", "hello")
    events = await bus.turns_ended("s1", 1)
    assert events[-1].payload.max_tokens is None


async def test_two_messages_sent_while_idle_are_entered_one_per_turn(bus: LoopBus) -> None:
    model = RecordingProvider()
    first = await bus.say("s1", "first follow-up")
    second = await bus.say("s1", "second follow-up")
    await bus.engine(router=recording_router(model))
    events = await bus.turns_ended("s1", 2)
    assert [(c[0], e.turn) for e in of_type(events, "turn/start") for c in claims([e])] == [
        (first, 1),
        (second, 2),
    ]
    for turn, input_id in ((1, first), (2, second)):
        entered = [e.payload.input_id for e in of_type(in_turn(events, turn), "user/message")]
        assert entered == [input_id]
        assert len(of_type(in_turn(events, turn), "step/start")) == 1
    assert len(model.chat()) == 2
    check_requests(events, model.chat())


async def test_followups_per_turn_can_let_one_turn_take_several(bus: LoopBus) -> None:
    from tavern_loop.options import LoopOptions

    first = await bus.say("s1", "one")
    second = await bus.say("s1", "two")
    await bus.engine(options=LoopOptions(followups_per_turn=8))
    events = await bus.turns_ended("s1", 1)
    assert [c[0] for c in claims(events)] == [first, second]
    assert len(of_type(events, "turn/start")) == 1


async def test_compact_with_nothing_to_compact_says_so(bus: LoopBus) -> None:
    await bus.engine()
    await bus.say("s1", "hello")
    await bus.turns_ended("s1", 1)
    command_id = await bus.command("s1", "compact")
    events = await bus.turns_ended("s1", 2)
    turn = in_turn(events, 2)
    assert types(turn) == ["turn/start", "context/compaction-skipped", "turn/end"]
    skipped = turn[1].payload
    assert (skipped.trigger, skipped.reason, skipped.input_id) == (
        "command",
        "nothing_to_compact",
        command_id,
    )
    assert skipped.detail.startswith("nothing to compact")
    end = turn[-1].payload
    assert (end.outcome, end.reason) == ("completed", skipped.detail)


async def test_a_summary_that_is_not_smaller_is_refused_with_an_event(bus: LoopBus) -> None:
    async with OpenAIServer() as server:
        server.enqueue(
            text_stream(["one"]),
            text_stream(["two"]),
            text_stream(["a summary far longer than the short exchange it would replace " * 20]),
        )
        await bus.engine(router=openai_router(server))
        for turn, text in enumerate(["q1", "q2"], 1):
            await bus.say("s1", text)
            await bus.turns_ended("s1", turn)
        await bus.command("s1", "compact")
        events = await bus.turns_ended("s1", 3)
    assert of_type(events, "context/compacted") == []
    skipped = one(events, "context/compaction-skipped").payload
    assert (skipped.trigger, skipped.reason) == ("command", "not_smaller")
    assert skipped.tokens_after > skipped.tokens_before
    assert f"({skipped.tokens_after} tokens)" in skipped.detail
    assert events[-1].payload.reason == skipped.detail


async def test_compact_with_arguments_is_refused_with_its_usage(bus: LoopBus) -> None:
    """`/compact` always compacts as far as it can, so `/compact now` promises nothing more:
    as in DSH, a `/compact` with arguments is refused with its usage and changes nothing."""
    await bus.engine(router=recording_router(RecordingProvider()))
    for turn in (1, 2):
        await bus.say("s1", f"message {turn}: " + "a fairly long line of chat. " * 10)
        await bus.turns_ended("s1", turn)
    await bus.command("s1", "compact", args={"now": True})
    events = await bus.turns_ended("s1", 3)
    assert types(in_turn(events, 3)) == ["turn/start", "turn/end"]
    assert (events[-1].payload.outcome, events[-1].payload.reason) == (
        "rejected",
        "Usage: /compact (no arguments)",
    )
    await bus.command("s1", "compact")  # the same without arguments compacts, under no pressure
    events = await bus.turns_ended("s1", 4)
    assert types(in_turn(events, 4)) == ["turn/start", "context/compacted", "turn/end"]
    assert events[-1].payload.reason == "compacted"


async def test_compact_sent_mid_turn_is_answered_busy_at_once(bus: LoopBus) -> None:
    bench = ToolBench()
    await bus.engine(tools=bench.tools())
    await bus.say("s1", "call gate with {}")
    await asyncio.wait_for(bench.gate_entered.wait(), 10)
    command_id = await bus.command("s1", "compact")
    events = await bus.logged("s1", "context/compaction-skipped")
    assert of_type(events, "tool/result") == [], "answered while the tool still runs"
    bench.gate.set()
    events = await bus.turns_ended("s1", 1)
    await bus.dispatch_settled()
    busy = one(events, "context/compaction-skipped")
    assert busy.turn == 1, "answered inside the running turn"
    assert (busy.payload.reason, busy.payload.input_id) == ("busy", command_id)
    assert [c.input_id for c in busy.payload.claimed] == [command_id]
    assert busy.payload.detail.startswith("busy")
    assert isinstance(busy, ContextCompactionSkipped)
    # what the dispatcher reads from the log when no runner holds the session
    assert await claimed_in_log(bus.js, "s1", busy.payload.claimed[0].stream_seq)
    await bus.say("s1", "next")  # the compact was answered: it does not run later either
    events = await bus.turns_ended("s1", 2)
    assert [e.payload.trigger for e in of_type(events, "turn/start")] == ["input", "input"]
    assert of_type(events, "context/compacted") == []
    assert len(of_type(events, "context/compaction-skipped")) == 1


async def test_compact_sent_during_one_long_stream_is_answered_before_it_ends(
    bus: LoopBus,
) -> None:
    """No step boundary comes while the model streams one long reply: the input watcher
    answers the `/compact` itself, in the middle of the step."""
    async with OpenAIServer() as server:
        slow = replace(text_stream(["a long ", "single-step ", "reply"]), pause_at=1, pause_s=3.0)
        server.enqueue(slow)
        await bus.engine(router=openai_router(server))
        await bus.say("s1", "tell me a long story")
        await bus.logged("s1", "agent/request")
        command_id = await bus.command("s1", "compact")
        events = await bus.logged("s1", "context/compaction-skipped", timeout=2.5)
        assert of_type(events, "assistant/message") == [], "answered while the reply streams"
        busy = one(events, "context/compaction-skipped")
        assert (busy.turn, busy.step, busy.payload.reason) == (1, 1, "busy")
        assert [c.input_id for c in busy.payload.claimed] == [command_id]
        events = await bus.turns_ended("s1", 1)
        await bus.dispatch_settled()
    assert one(events, "assistant/message").payload.content == "a long single-step reply"
    assert len(of_type(events, "turn/start")) == 1, "the answered compact runs no turn later"


async def test_compact_behind_a_waiting_message_keeps_its_place(bus: LoopBus) -> None:
    """A message sent mid-turn waits for the step boundary: a `/compact` sent after it is not
    claimed before it (claims follow INPUTS, the cursor never passes a waiting input); it is
    answered "busy" once the message has joined the turn."""
    bench = ToolBench()
    await bus.engine(tools=bench.tools())
    first = await bus.say("s1", "call gate with {}")
    await asyncio.wait_for(bench.gate_entered.wait(), 10)
    waiting = await bus.say("s1", "and then?")
    command_id = await bus.command("s1", "compact")
    await asyncio.sleep(0.5)  # the watcher has seen the command (and must leave it in place)
    assert of_type(await bus.log("s1"), "context/compaction-skipped") == []
    bench.gate.set()
    events = await bus.turns_ended("s1", 1)
    await bus.dispatch_settled()
    assert [c[0] for c in claims(events)] == [first, waiting, command_id]
    seqs = [c[1] for c in claims(events)]
    assert seqs == sorted(seqs)
    texts = [e.payload.text for e in of_type(events, "user/message") if e.source == "user"]
    assert texts == ["call gate with {}", "and then?"]
    busy = one(events, "context/compaction-skipped")
    assert (busy.turn, busy.payload.reason) == (1, "busy")
    assert len(of_type(events, "turn/start")) == 1
