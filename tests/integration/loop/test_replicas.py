"""Two loop engines on one bus: every input claimed and answered exactly once, turns never nest."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from functools import partial

import pytest

from tavern_events.envelope import SessionEvent
from tavern_loop.dispatch import claimed_in_log
from tavern_loop.engine import LoopEngine
from tavern_loop.lease import Lease
from tavern_loop.options import LoopOptions
from tests.integration.loop.checks import check_log, claims, of_type
from tests.integration.loop.conftest import LoopBus
from tests.integration.loop.tools import ToolBench
from tests.support import eventually

pytestmark = pytest.mark.integration

SESSIONS = ("r1", "r2", "r3")
PER_SESSION = 8


def message(session: str, index: int) -> str:
    if index % 2:
        args = json.dumps({"tag": f"{session}-{index}", "ms": 60})
        return f"call sleepy with {args}"
    return f"note {session}-{index}"


def answered(events: list[SessionEvent]) -> set[str]:
    """Input ids of user messages followed, in their own completed turn, by a final answer."""
    done: set[str] = set()
    outcome = {e.turn: e.payload.outcome for e in of_type(events, "turn/end")}
    for position, event in enumerate(events):
        if event.type != "user/message" or outcome.get(event.turn) != "completed":
            continue
        later = [e for e in events[position:] if e.turn == event.turn]
        replies = [e for e in of_type(later, "assistant/message") if not e.payload.tool_calls]
        if replies and event.payload.input_id:
            done.add(event.payload.input_id)
    return done


def count_leases(engine: LoopEngine, taken: Counter[str]) -> None:
    """Count the leases `engine` acquires (a spy on its lease table)."""
    acquire = engine.leases.acquire

    async def spy(session_id: str) -> Lease | None:
        lease = await acquire(session_id)
        if lease is not None:
            taken[engine.holder] += 1
        return lease

    engine.leases.acquire = spy  # type: ignore[method-assign]


async def test_two_engines_answer_every_input_exactly_once(bus: LoopBus) -> None:
    taken: Counter[str] = Counter()
    # No idle hold: every session changes hands between turns, the demanding case.
    for _ in range(2):
        engine = await bus.engine(options=LoopOptions(idle_hold_s=0), tools=ToolBench().tools())
        count_leases(engine, taken)
    sent: dict[str, list[str]] = {s: [] for s in SESSIONS}

    async def claimed(session: str, input_id: str) -> bool:
        return input_id in {c[0] for c in claims(await bus.log(session))}

    async def fire(session: str) -> None:
        for index in range(PER_SESSION):
            input_id = await bus.say(session, message(session, index))
            sent[session].append(input_id)
            if index % 3 == 0:  # sometimes let it start; the others land mid-turn or queue up
                await eventually(partial(claimed, session, input_id), timeout=10)

    await asyncio.gather(*(fire(s) for s in SESSIONS))

    async def settled(session: str) -> list[SessionEvent] | None:
        events = await bus.log(session)
        open_turns = len(of_type(events, "turn/start")) - len(of_type(events, "turn/end"))
        claimed = {c[0] for c in claims(events)}
        return events if claimed >= set(sent[session]) and open_turns == 0 else None

    for session in SESSIONS:
        events = await eventually(partial(settled, session), timeout=20)
        assert events is not None
        check_log(events)
        claimed_by = Counter(c[0] for c in claims(events))
        assert claimed_by == Counter(sent[session]), "each input claimed by exactly one event"
        appended = Counter(e.payload.input_id for e in of_type(events, "user/message"))
        assert appended == Counter(sent[session]), "each input appended exactly once"
        assert answered(events) == set(sent[session])
    await bus.dispatch_settled()
    assert len(taken) == 2, f"both engines ran sessions: {taken}"


async def test_dispatch_sees_an_input_claimed_at_an_earlier_step_of_the_last_turn(
    bus: LoopBus,
) -> None:
    bench = ToolBench()
    await bus.engine(tools=bench.tools())
    await bus.say("s1", "call gate with {}")
    await asyncio.wait_for(bench.gate_entered.wait(), 10)
    late_id, late_seq = await bus.say_at("s1", 'call echo with {"text": "late"}')
    bench.gate.set()
    events = await bus.turns_ended("s1", 1)
    steps = of_type(events, "step/start")
    assert [[c.input_id for c in s.payload.claimed] for s in steps] == [[], [late_id], []]
    assert await claimed_in_log(bus.js, "s1", late_seq)
    assert not await claimed_in_log(bus.js, "s1", late_seq + 1)


async def test_a_cancel_reaches_the_turn_whichever_engine_runs_it(bus: LoopBus) -> None:
    for _ in range(2):
        await bus.engine(tools=ToolBench().tools())

    async def gates_called(count: int) -> bool:
        return len(of_type(await bus.log("s1"), "tool/call")) == count

    for turn in (1, 2, 3):
        await bus.say("s1", "call gate with {}")
        await eventually(partial(gates_called, turn))
        await bus.cancel("s1")
        events = await bus.turns_ended("s1", turn)
        assert (events[-1].turn, events[-1].payload.outcome) == (turn, "cancelled")
