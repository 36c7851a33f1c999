"""What each request carries, per mode, and that the log alone rebuilds it."""

from __future__ import annotations

from collections import Counter

import pytest

from tavern_loop.domain.history import derive_messages
from tests.integration.loop.checks import RecordingProvider, of_type, recording_router
from tests.integration.loop.conftest import LoopBus
from tests.integration.loop.tools import ToolBench
from tests.integration.profiles.conftest import check_rebuilt, command, requests, stop

pytestmark = pytest.mark.integration

LOOP_SOURCES = ("host", "user", "plugin:ledger", "plugin:repeat-tool-reminder")


def filler(turn: int) -> str:
    return f"Turn {turn}: the marker word is quokka{turn}. " + "It rained again today. " * 25


async def test_one_agent_tavern_turn_is_one_set_of_loop_events(bus: LoopBus) -> None:
    model = RecordingProvider()
    await bus.engine(router=recording_router(model), tools=ToolBench().tools())
    await bus.say("s1", 'call echo with {"text": "one"} call noop with {}')
    events = await bus.turns_ended("s1", 1)
    kinds = Counter(e.type for e in events)
    assert (kinds["session/created"], kinds["turn/start"], kinds["turn/end"]) == (1, 1, 1)
    assert kinds["step/start"] == kinds["step/end"] == kinds["agent/request"] == 2
    assert kinds["assistant/message"] == 2, "one answer per request, never a mirrored copy"
    assert len(model.chat()) == 2, "the model was asked once per step: no second loop"
    assert len({e.id for e in events}) == len(events)
    for event in events:
        assert event.source in LOOP_SOURCES or event.source.startswith("tool:"), event.type
    check_rebuilt(events, model.chat())


async def test_dsh_native_sends_the_whole_surface_and_projects_nothing(bus: LoopBus) -> None:
    model = RecordingProvider()
    await bus.engine(router=recording_router(model))
    for turn in range(1, 4):
        await bus.say("s1", filler(turn))
        await bus.turns_ended("s1", turn)
    events = await bus.log("s1")
    assert of_type(events, "request/projection") == []
    assert of_type(events, "context/compacted") == []
    for request, sent in zip(requests(events), model.chat(), strict=True):
        before = [e for e in events if e.seq < request.seq]
        assert sent[1:] == derive_messages(before), "the whole surface"
    check_rebuilt(events, model.chat())


async def test_a_new_model_route_changes_the_next_turns_context_window(bus: LoopBus) -> None:
    first = await bus.engine(router=recording_router(RecordingProvider(window=32_000)))
    await bus.say("s1", "hello")
    await bus.turns_ended("s1", 1)
    await stop(bus, first)
    await bus.engine(router=recording_router(RecordingProvider(window=9_000)))
    await bus.say("s1", "hello again")
    events = await bus.turns_ended("s1", 2)
    assert [r.payload.context_window for r in requests(events)] == [32_000, 9_000]
    assert [e.type for e in events].count("session/binding-changed") == 0, "nothing cached"


async def test_agent_managed_leaves_history_out_without_touching_the_log(bus: LoopBus) -> None:
    model = RecordingProvider(window=3_000)
    await bus.engine(router=recording_router(model))
    await command(bus, "native", "create")
    await command(bus, "managed", "create", context_mode="agent-managed")
    for turn in range(2, 14):
        for session in ("native", "managed"):
            await bus.say(session, filler(turn))
        await bus.turns_ended("native", turn)
        await bus.turns_ended("managed", turn)
    native_log, managed_log = await bus.log("native"), await bus.log("managed")
    assert of_type(native_log, "context/compacted"), "dsh-native: the host's pressure policy"
    assert of_type(managed_log, "context/compacted") == [], "compaction measures the projection"
    projections = of_type(managed_log, "request/projection")
    assert len(projections) == len(requests(managed_log)) == 12
    last = projections[-1].payload
    user_seqs = [e.seq for e in of_type(managed_log, "user/message") if e.source == "user"]
    assert set(user_seqs) - set(last.included_seqs), "older turns were left out"
    assert user_seqs[-1] in last.required_seqs
    assert last.token_estimate <= last.budget_tokens
    assert [m["content"] for m in derive_messages(managed_log) if m["role"] == "user"] == [
        filler(turn) for turn in range(2, 14)
    ], "nothing was deleted"


async def test_every_managed_request_is_rebuilt_from_the_log(bus: LoopBus) -> None:
    model = RecordingProvider(window=3_000)
    await bus.engine(router=recording_router(model), tools=ToolBench().tools())
    await command(bus, "s1", "create", context_mode="agent-managed")
    for turn in range(2, 8):
        await bus.say("s1", filler(turn) + ' call echo with {"text": "x"}')
        await bus.turns_ended("s1", turn)
    events = await bus.log("s1")
    assert len(of_type(events, "request/projection")) == len(model.chat()) == 12
    check_rebuilt(events, model.chat())
    for sent in model.chat():
        calls = {c["id"] for m in sent for c in m.get("tool_calls") or []}
        results = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
        assert calls == results, "a call and its result travel together"


async def test_switching_back_to_native_sends_the_whole_surface_again(bus: LoopBus) -> None:
    model = RecordingProvider(window=3_000)
    await bus.engine(router=recording_router(model))
    await command(bus, "s1", "create", context_mode="agent-managed")
    for turn in range(2, 9):
        await bus.say("s1", filler(turn))
        await bus.turns_ended("s1", turn)
    await command(bus, "s1", "mode", context_mode="dsh-native")
    await bus.say("s1", "what was the marker word of turn 2?")
    events = await bus.turns_ended("s1", 10)
    last = requests(events)[-1]
    before = [e for e in events if e.seq < last.seq]
    assert model.chat()[-1][1:] == derive_messages(before), "the whole surface"
    assert requests(events)[-1].payload.params["profile"] == "agent-tavern/dsh-native"
    check_rebuilt(events, model.chat())
