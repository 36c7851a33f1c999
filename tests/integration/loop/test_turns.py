"""Turns as events on a real nats-server: order, payloads, claims, tools, pre-step rejection."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest

from tavern_events import subjects
from tavern_events.ids import new_id
from tavern_events.input import MessageInput, MessageInputPayload
from tavern_events.union import encode
from tavern_loop.options import LoopOptions
from tests.integration.loop.checks import (
    RecordingProvider,
    check_requests,
    claims,
    in_turn,
    of_type,
    one,
    recording_router,
    user_texts,
)
from tests.integration.loop.conftest import LoopBus, types
from tests.integration.loop.tools import ToolBench

pytestmark = pytest.mark.integration

NOT_CHUNK = lambda t: t == "assistant/chunk"  # noqa: E731


async def test_a_plain_turn_appends_events_in_order(bus: LoopBus) -> None:
    model = RecordingProvider()
    await bus.engine(router=recording_router(model))
    input_id, input_seq = await bus.say_at("s1", "hello there")
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
    assert claims(events) == [(input_id, input_seq, "turn/start")]
    user = one(events, "user/message")
    assert (user.payload.text, user.payload.input_id, user.source) == (
        "hello there",
        input_id,
        "user",
    )
    request = one(events, "agent/request")
    assert (request.payload.offline, request.payload.attempt) == (True, 1)
    assert request.payload.tool_names == ("spill_read",)
    answer = one(events, "assistant/message")
    assert answer.payload.content.startswith('You said: "hello there"')
    chunks = of_type(events, "assistant/chunk")
    assert chunks, "the stream is kept as chunks"
    assert "".join(c.payload.delta for c in chunks) == answer.payload.content
    end = events[-1]
    assert (end.payload.outcome, end.payload.steps, end.turn) == ("completed", 1, 1)
    assert end.payload.usage == answer.payload.usage
    check_requests(events, model.chat())


async def test_a_tool_round_trip_runs_the_call_between_two_requests(bus: LoopBus) -> None:
    model = RecordingProvider()
    await bus.engine(router=recording_router(model), tools=ToolBench().tools())
    await bus.say("s1", 'call echo with {"text": "ping"}')
    events = await bus.turns_ended("s1", 1)
    assert types(events, NOT_CHUNK)[1:] == [
        "turn/start",
        "step/start",
        "user/message",
        "agent/request",
        "assistant/message",
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
        "agent/request",
        "assistant/message",
        "step/end",
        "turn/stopping",
        "turn/end",
    ]
    asked, answer = of_type(events, "assistant/message")
    (part,) = asked.payload.tool_calls
    assert (part.name, json.loads(part.arguments)) == ("echo", {"text": "ping"})
    assert asked.payload.finish_reason == "tool_calls"
    call, result = one(events, "tool/call"), one(events, "tool/result")
    assert (call.payload.call_id, call.payload.arguments) == (part.id, part.arguments)
    assert (result.payload.call_id, result.payload.ok) == (part.id, True)
    assert (result.payload.content, result.source) == ("echo: ping", "tool:echo")
    assert [e.step for e in (asked, call, result)] == [1, 1, 1]
    assert answer.step == 2
    assert answer.payload.content == "Done: echo -> echo: ping"
    first_end = of_type(events, "step/end")[0]
    assert (first_end.payload.tool_calls, first_end.payload.finish_reason) == (1, "tool_calls")
    end = events[-1]
    assert (end.payload.outcome, end.payload.steps) == ("completed", 2)
    assert end.payload.usage.total_tokens == (
        asked.payload.usage.total_tokens + answer.payload.usage.total_tokens
    )
    check_requests(events, model.chat())
    assert model.chat()[1][-1] == {"role": "tool", "tool_call_id": part.id, "content": "echo: ping"}


async def test_parallel_calls_finishing_in_reverse_are_committed_in_model_order(
    bus: LoopBus,
) -> None:
    bench, model = ToolBench(), RecordingProvider()
    await bus.engine(router=recording_router(model), tools=bench.tools())
    text = " ".join(
        f'call sleepy with {{"tag": "{tag}", "ms": {ms}}}'
        for tag, ms in (("a", 450), ("b", 300), ("c", 150))
    )
    await bus.say("s1", text)
    events = await bus.turns_ended("s1", 1)
    assert bench.finished == ["c", "b", "a"], "the bodies really finished in reverse"
    step_one = [e for e in in_turn(events, 1) if e.step == 1 and e.type.startswith("tool/")]
    assert [e.type for e in step_one] == ["tool/call"] * 3 + ["tool/result"] * 3
    calls, results = step_one[:3], step_one[3:]
    assert all(c.payload.parallel_safe for c in calls)
    assert [json.loads(c.payload.arguments)["tag"] for c in calls] == ["a", "b", "c"]
    assert [r.payload.content for r in results] == ["woke a", "woke b", "woke c"]
    asked = of_type(events, "assistant/message")[0]
    assert [r.payload.call_id for r in results] == [c.id for c in asked.payload.tool_calls]
    assert results[0].payload.duration_ms >= 450
    assert of_type(events, "step/end")[0].payload.tool_calls == 3
    check_requests(events, model.chat())


async def test_an_input_over_the_limit_is_rejected_before_any_step(bus: LoopBus) -> None:
    model = RecordingProvider()
    await bus.engine(options=LoopOptions(max_input_chars=40), router=recording_router(model))
    long_id, long_seq = await bus.say_at("s1", "x" * 41)
    events = await bus.turns_ended("s1", 1)
    assert types(events) == ["session/created", "turn/start", "turn/end"]
    end = events[-1]
    assert (end.payload.outcome, end.payload.steps) == ("rejected", 0)
    assert long_id in end.payload.reason
    assert claims(events) == [(long_id, long_seq, "turn/start")]

    short_id, short_seq = await bus.say_at("s1", "short and sweet")
    events = await bus.turns_ended("s1", 2)
    assert claims(events)[1:] == [(short_id, short_seq, "turn/start")]
    assert user_texts(events) == ["short and sweet"], "the rejected input never reaches history"
    assert events[-1].payload.outcome == "completed"
    check_requests(events, model.chat())


async def test_a_rejected_input_does_not_take_the_next_queued_input_with_it(
    bus: LoopBus,
) -> None:
    long_id, _ = await bus.say_at("s1", "x" * 41)
    short_id, _ = await bus.say_at("s1", "short and sweet")
    await bus.engine(options=LoopOptions(max_input_chars=40))  # both are pending at start
    events = await bus.turns_ended("s1", 2)
    first, second = (e for e in events if e.type == "turn/end")
    assert (first.payload.outcome, second.payload.outcome) == ("rejected", "completed")
    assert [(c[0], c[2]) for c in claims(events)] == [
        (long_id, "turn/start"),
        (short_id, "turn/start"),
    ]
    assert user_texts(events) == ["short and sweet"]


async def test_a_message_sent_during_a_tool_joins_the_turn_at_the_next_step(bus: LoopBus) -> None:
    bench, model = ToolBench(), RecordingProvider()
    await bus.engine(router=recording_router(model), tools=bench.tools())
    first_id, _ = await bus.say_at("s1", "call gate with {}")
    await asyncio.wait_for(bench.gate_entered.wait(), 10)
    second_id, second_seq = await bus.say_at("s1", "and one more thing")
    bench.gate.set()
    events = await bus.turns_ended("s1", 1)
    await bus.dispatch_settled()
    assert len(of_type(events, "turn/start")) == 1
    assert [c[0] for c in claims(events)] == [first_id, second_id]
    step_two = of_type(events, "step/start")[1]
    assert [(c.input_id, c.stream_seq) for c in step_two.payload.claimed] == [
        (second_id, second_seq)
    ]
    joined = [e for e in of_type(events, "user/message") if e.payload.input_id == second_id]
    assert [(e.turn, e.step) for e in joined] == [(1, 2)]
    answer = of_type(events, "assistant/message")[-1]
    assert (answer.turn, answer.step) == (1, 2)
    assert answer.payload.content.startswith('You said: "and one more thing"')
    assert one(events, "tool/result").payload.content == "the gate opened"
    assert events[-1].payload.steps == 2
    check_requests(events, model.chat())


@pytest.mark.parametrize("header", ["none", "other"])
async def test_a_mid_turn_message_under_no_or_another_msg_id_still_joins_at_the_next_step(
    bus: LoopBus, header: str
) -> None:
    """The step boundary skips reading INPUTS only when every input seen live is claimed; an
    input whose `Nats-Msg-Id` is missing or not its input id is read all the same."""
    bench = ToolBench()
    await bus.engine(tools=bench.tools())
    await bus.say("s1", "call gate with {}")
    await asyncio.wait_for(bench.gate_entered.wait(), 10)
    late = MessageInput(
        input_id=new_id(),
        session_id="s1",
        ts=datetime.now(UTC),
        payload=MessageInputPayload(text="said quietly"),
    )
    headers = None if header == "none" else {"Nats-Msg-Id": new_id()}
    await bus.js.publish(subjects.session_input("s1", "message"), encode(late), headers=headers)
    bench.gate.set()
    events = await bus.turns_ended("s1", 1)
    joined = [e for e in of_type(events, "user/message") if e.payload.input_id == late.input_id]
    assert [(e.turn, e.step) for e in joined] == [(1, 2)]


async def test_an_over_long_message_sent_mid_turn_waits_for_a_rejected_turn_of_its_own(
    bus: LoopBus,
) -> None:
    bench = ToolBench()
    await bus.engine(options=LoopOptions(max_input_chars=40), tools=bench.tools())
    await bus.say("s1", "call gate with {}")
    await asyncio.wait_for(bench.gate_entered.wait(), 10)
    long_id, _ = await bus.say_at("s1", "y" * 41)
    bench.gate.set()
    events = await bus.turns_ended("s1", 2)
    first, second = (e for e in events if e.type == "turn/end")
    assert (first.payload.outcome, first.payload.steps) == ("completed", 2)
    assert (second.payload.outcome, second.payload.steps) == ("rejected", 0)
    assert [c[2] for c in claims(events) if c[0] == long_id] == ["turn/start"]
    assert "y" * 41 not in user_texts(events)
