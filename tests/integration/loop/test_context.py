"""Context defences in running turns: pruning under pressure, /compact, spill, the repeat guard."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from tavern_events.envelope import SessionEvent
from tavern_loop.domain.guard import GENTLE_TEXT, GuardConfig
from tavern_loop.domain.history import checkpoint_text, derive_messages
from tavern_loop.domain.pruner import MARKER, PrunerConfig
from tavern_loop.options import CompactionOptions, LoopOptions
from tavern_loop.turn import REMINDER_SOURCE
from tests.integration.loop.checks import (
    RecordingProvider,
    check_requests,
    in_turn,
    of_type,
    one,
    recording_router,
    user_texts,
)
from tests.integration.loop.conftest import LoopBus, types
from tests.integration.loop.tools import ToolBench, numbered_text

pytestmark = pytest.mark.integration

PRUNER = PrunerConfig(threshold_chars=1000, head_chars=300, tail_chars=100)


async def test_pressure_prunes_a_long_tool_result_without_touching_the_log(bus: LoopBus) -> None:
    bench, model = ToolBench(big_chars=16_000), RecordingProvider(window=4_000)
    options = LoopOptions(spill_max_inline_bytes=None, compaction=CompactionOptions(pruner=PRUNER))
    await bus.engine(options=options, router=recording_router(model), tools=bench.tools())
    await bus.say("s1", "call big with {}")
    events = await bus.turns_ended("s1", 1)
    assert types(events, lambda t: t == "assistant/chunk")[5:] == [
        "assistant/message",
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
        "context/compacted",
        "agent/request",
        "assistant/message",
        "step/end",
        "turn/stopping",
        "turn/end",
    ]
    result, compacted = one(events, "tool/result"), one(events, "context/compacted")
    full = numbered_text(16_000)
    assert result.payload.content == full, "the log keeps the whole result"
    payload = compacted.payload
    assert (payload.strategy, payload.trigger) == ("prune", "pressure")
    assert payload.pruned_call_ids == (result.payload.call_id,)
    assert (payload.pruning.threshold_chars, payload.pruning.head_chars) == (1000, 300)
    assert payload.tokens_after < payload.tokens_before
    pruned = full[:300] + MARKER + full[-100:]
    tool_messages = [m for m in derive_messages(events) if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [pruned]
    assert model.chat()[1][-1]["content"] == pruned, "the model got the pruned text"
    check_requests(events, model.chat())


async def test_the_compact_command_summarises_history_in_a_turn_without_steps(
    bus: LoopBus,
) -> None:
    model = RecordingProvider()
    await bus.engine(router=recording_router(model))
    for turn in (1, 2, 3):
        await bus.say("s1", f"message {turn}: " + "a fairly long line of chat. " * 10)
        await bus.turns_ended("s1", turn)
    await bus.command("s1", "compact")
    events = await bus.turns_ended("s1", 4)
    command_turn = in_turn(events, 4)
    assert types(command_turn) == ["turn/start", "context/compacted", "turn/end"]
    start, compacted, end = command_turn
    assert start.payload.trigger == "command"
    assert [c.kind for c in start.payload.claimed] == ["command"]
    assert (end.payload.outcome, end.payload.reason, end.payload.steps) == (
        "completed",
        "compacted",
        0,
    )
    payload = compacted.payload
    assert (payload.strategy, payload.trigger) == ("summary", "command")
    second_answer = of_type(events, "assistant/message")[1]
    assert payload.replaces_through_seq == second_answer.seq
    history = derive_messages(events)
    assert history[0] == {"role": "user", "content": checkpoint_text(payload.summary)}
    assert history[1]["content"].startswith("message 3:")
    assert len(history) == 3

    await bus.say("s1", "and now?")
    events = await bus.turns_ended("s1", 5)
    assert model.chat()[-1][1] == history[0], "the next request starts from the checkpoint"
    summarised = [r for r in model.requests if r.route == "summarise"]
    assert len(summarised) == 1
    check_requests(events, model.chat())


async def test_a_big_result_spills_and_spill_read_pages_through_it(bus: LoopBus) -> None:
    bench, model = ToolBench(big_chars=30_000), RecordingProvider()
    options = LoopOptions(spill_max_inline_bytes=2_000)
    await bus.engine(options=options, router=recording_router(model), tools=bench.tools())
    await bus.say("s1", "call big with {}")
    events = await bus.turns_ended("s1", 1)
    result = one(events, "tool/result").payload
    full = numbered_text(30_000)
    assert result.spill is not None
    assert (result.spill.bytes, result.truncated, result.ok) == (30_000, True, True)
    locator = result.spill.locator
    assert locator.startswith("spill:s1:big-")
    assert len(result.content.encode()) <= 2_000
    assert result.content.startswith(full[:500])
    assert locator in result.content, "the preview names its locator"

    await bus.say("s1", f"read spill {locator}")
    await bus.turns_ended("s1", 2)
    offset = json.dumps({"locator": locator, "offset": 20_000})
    await bus.say("s1", f"call spill_read with {offset}")
    events = await bus.turns_ended("s1", 3)
    pages = [e.payload for e in of_type(events, "tool/result") if e.payload.name == "spill_read"]
    assert [(p.ok, p.spill, p.truncated) for p in pages] == [(True, None, False)] * 2
    first, second = (p.content for p in pages)
    assert first.endswith("[spill_read: characters 0-20000 of 30000; continue with offset 20000]")
    assert second.endswith("[spill_read: characters 20000-30000 of 30000; end of output]")
    text = first.rsplit("\n\n[spill_read:", 1)[0] + second.rsplit("\n\n[spill_read:", 1)[0]
    assert text == full
    check_requests(events, model.chat())


def reminders(events: Sequence[SessionEvent]) -> list[Any]:
    return [e for e in of_type(events, "user/message") if e.source == REMINDER_SOURCE]


async def test_the_third_identical_call_brings_a_gentle_reminder_next_step(bus: LoopBus) -> None:
    model = RecordingProvider()
    await bus.engine(router=recording_router(model), tools=ToolBench().tools())
    same = ['{"tag": "t", "ms": 1}', '{"ms": 1, "tag": "t"}', '{"tag":"t","ms":1}']
    await bus.say("s1", " ".join(f"call sleepy with {args}" for args in same))
    events = await bus.turns_ended("s1", 1)
    (reminder,) = reminders(events)
    assert (reminder.payload.text, reminder.form, reminder.turn, reminder.step) == (
        GENTLE_TEXT,
        "reminder",
        1,
        2,
    )
    step_two = [e for e in in_turn(events, 1) if e.step == 2]
    assert [e.type for e in step_two[:3]] == ["step/start", "user/message", "agent/request"]
    assert model.chat()[1][-1] == {"role": "user", "content": GENTLE_TEXT}
    check_requests(events, model.chat())


async def test_excluded_tools_are_transparent_and_rejected_calls_count(bus: LoopBus) -> None:
    options = LoopOptions(guard=GuardConfig(exclude=("noop",)))
    await bus.engine(options=options, tools=ToolBench().tools())
    await bus.say(
        "s1",
        'call echo with {"text": "x"} call noop with {} call echo with {"text": "x"} '
        'call noop with {} call echo with {"text": "x"}',
    )
    events = await bus.turns_ended("s1", 1)
    assert [e.payload.text for e in reminders(events)] == [GENTLE_TEXT]

    await bus.say("s1", 'call echo with {"txt": 1} ' * 3)
    events = await bus.turns_ended("s1", 2)
    rejected = [e.payload for e in in_turn(events, 2) if e.type == "tool/result"]
    assert [(r.ok, r.error.code) for r in rejected] == [(False, "INVALID_ARGS")] * 3
    assert [e.turn for e in reminders(events)] == [1, 2]


async def test_guard_chains_are_kept_per_session(bus: LoopBus) -> None:
    bench = ToolBench()
    options = LoopOptions(guard=GuardConfig(exclude=("gate",)))
    await bus.engine(options=options, tools=bench.tools())
    same = 'call echo with {"text": "x"}'
    await bus.say("a", f"{same} {same} call gate with {{}} {same}")
    await asyncio.wait_for(bench.gate_entered.wait(), 10)
    await bus.say("b", same)  # another session, same agent id, same call, meanwhile
    events_b = await bus.turns_ended("b", 1)
    bench.gate.set()
    events_a = await bus.turns_ended("a", 1)
    assert reminders(events_b) == []
    assert [e.payload.text for e in reminders(events_a)] == [GENTLE_TEXT]
    assert user_texts(events_a)[0].startswith(same)
