"""Session bindings on a running loop: defaults, old bindings, create, mode switches, forks."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest

from tavern_events import subjects
from tavern_loop.dispatch import DURABLE
from tavern_loop.options import LoopOptions, ProfileOptions
from tests.integration.loop.checks import RecordingProvider, of_type, one, recording_router
from tests.integration.loop.conftest import LoopBus, types
from tests.integration.loop.tools import ToolBench
from tests.integration.profiles.conftest import check_rebuilt, command, ended, requests, stop
from tests.support import eventually

pytestmark = pytest.mark.integration


async def delivered(bus: LoopBus) -> bool:
    """The dispatcher holds every input (none waits for delivery; claims are pending)."""
    info = await bus.js.consumer_info("INPUTS", DURABLE)
    return bool(info.num_pending == 0 and info.num_ack_pending > 0)


UNAVAILABLE = LoopOptions(profiles=ProfileOptions(compaction_cooperates=False))


async def test_a_new_session_is_agent_tavern_in_dsh_native(bus: LoopBus) -> None:
    await bus.engine()
    await bus.say("s1", "hello")
    events = await bus.turns_ended("s1", 1)
    created = events[0]
    assert created.type == "session/created"
    p = created.payload
    assert (p.architecture, p.context_mode, p.chat_id) == ("agent-tavern", "dsh-native", "s1")
    (request,) = requests(events)
    assert request.payload.params["profile"] == "agent-tavern/dsh-native"
    assert (
        "Session: s1 (architecture agent-tavern, context mode dsh-native)"
        in (request.payload.params["system"])
    )
    assert of_type(events, "request/projection") == []


async def test_an_old_binding_without_a_mode_runs_as_dsh_native(bus: LoopBus) -> None:
    v1 = {
        "id": "old-created",
        "type": "session/created",
        "v": 1,
        "session_id": "old",
        "seq": 1,
        "ts": datetime(2025, 1, 1, tzinfo=UTC).isoformat(),
        "payload": {"architecture": "agent-tavern", "chat_id": "old"},
    }
    subject = subjects.session_event("old", "session/created")
    await bus.js.publish(subject, json.dumps(v1).encode(), headers={"Nats-Msg-Id": v1["id"]})
    await bus.engine()
    await bus.say("old", "still there?")
    events = await bus.turns_ended("old", 1)
    assert events[0].payload.context_mode == "dsh-native"
    assert requests(events)[0].payload.params["profile"] == "agent-tavern/dsh-native"
    assert of_type(events, "request/projection") == []


async def test_the_default_architecture_changes_new_sessions_only(bus: LoopBus) -> None:
    first = await bus.engine()
    await bus.say("kept", "hello")
    await bus.turns_ended("kept", 1)
    await stop(bus, first)
    await bus.engine(options=LoopOptions(profiles=ProfileOptions(default_architecture="st")))
    await bus.say("kept", "and now?")
    await bus.say("fresh", "hello")
    kept, fresh = await bus.turns_ended("kept", 2), await bus.turns_ended("fresh", 1)
    assert requests(kept)[-1].payload.params["profile"] == "agent-tavern/dsh-native"
    assert fresh[0].payload.architecture == "st"
    assert requests(fresh)[0].payload.params["profile"] == "st"
    assert requests(fresh)[0].payload.tool_names == ()


async def test_create_binds_a_new_session_and_only_once(bus: LoopBus) -> None:
    await bus.engine()
    await command(bus, "c1", "create", architecture="st")
    events = await bus.turns_ended("c1", 1)
    assert types(events) == ["session/created", "turn/start", "turn/end"]
    assert (events[0].payload.architecture, events[0].payload.context_mode) == ("st", None)
    assert (ended(events, 1).payload.outcome, ended(events, 1).payload.reason) == (
        "completed",
        "created",
    )
    await command(bus, "c1", "create", architecture="agent-tavern")
    events = await bus.turns_ended("c1", 2)
    assert ended(events, 2).payload.outcome == "rejected"
    assert "already exists (st)" in ended(events, 2).payload.reason


async def test_agent_managed_is_refused_when_unavailable_and_the_session_stays_native(
    bus: LoopBus,
) -> None:
    await bus.engine(options=UNAVAILABLE)
    await command(bus, "m1", "create", context_mode="agent-managed")
    events = await bus.turns_ended("m1", 1)
    assert events[0].payload.context_mode == "dsh-native"
    end = ended(events, 1).payload
    assert end.outcome == "rejected"
    assert "agent-managed is unavailable (compaction does not measure" in end.reason
    await command(bus, "m1", "mode", context_mode="agent-managed")
    await bus.say("m1", "hello")
    events = await bus.turns_ended("m1", 3)
    assert ended(events, 2).payload.outcome == "rejected"
    assert "the session stays in dsh-native" in ended(events, 2).payload.reason
    assert of_type(events, "session/binding-changed") == []
    assert of_type(events, "request/projection") == []


async def test_the_mode_switches_at_an_idle_turn_boundary_and_back(bus: LoopBus) -> None:
    bench, model = ToolBench(), RecordingProvider()
    await bus.engine(router=recording_router(model), tools=bench.tools())
    await bus.say("s1", "call gate with {}")
    await asyncio.wait_for(bench.gate_entered.wait(), 10)
    await command(bus, "s1", "mode", context_mode="agent-managed")
    await eventually(lambda: delivered(bus), timeout=10)  # the loop has seen the command
    busy = await bus.log("s1")
    assert of_type(busy, "session/binding-changed") == [], "not while a turn runs"
    bench.gate.set()
    events = await bus.turns_ended("s1", 2)
    assert types([e for e in events if e.turn == 2]) == [
        "turn/start",
        "session/binding-changed",
        "turn/end",
    ]
    changed = one(events, "session/binding-changed").payload
    assert (changed.from_context_mode, changed.to_context_mode) == ("dsh-native", "agent-managed")
    await bus.say("s1", "now managed")
    events = await bus.turns_ended("s1", 3)
    assert [e.turn for e in of_type(events, "request/projection")] == [3]
    await command(bus, "s1", "mode", context_mode="dsh-native")
    await bus.say("s1", "native again")
    events = await bus.turns_ended("s1", 5)
    assert [e.turn for e in of_type(events, "request/projection")] == [3], "back: no projection"
    last = requests(events)[-1].payload
    assert last.params["profile"] == "agent-tavern/dsh-native"
    check_rebuilt(events, model.chat())


async def test_fork_starts_a_child_linked_to_its_parent_in_another_architecture(
    bus: LoopBus,
) -> None:
    await bus.engine()
    await bus.say("p1", "the lamp is lit")
    first = await bus.turns_ended("p1", 1)
    await command(bus, "p1", "fork", session_id="p1-st", architecture="st")
    parent = await bus.turns_ended("p1", 2)
    assert ended(parent, 2).payload.reason == "forked p1-st"
    forked = one(parent, "session/forked").payload
    assert (forked.child_session_id, forked.at_seq) == ("p1-st", first[-1].seq)
    await bus.say("p1-st", "hello from the branch")
    child = await bus.turns_ended("p1-st", 1)
    created = child[0].payload
    assert (created.architecture, created.parent_session_id, created.forked_at_seq) == (
        "st",
        "p1",
        first[-1].seq,
    )
    assert requests(child)[0].payload.params["profile"] == "st"
    await command(bus, "p1", "fork", session_id="p1-st")
    again = await bus.turns_ended("p1", 3)
    assert ended(again, 3).payload.reason == "session p1-st already exists"
