"""Stopping an engine: prompt when idle; an unfinished turn is handed back, not held."""

from __future__ import annotations

import asyncio
import time

import pytest

from tavern_runtime.provision import LEASES
from tests.integration.loop.checks import in_turn, of_type
from tests.integration.loop.conftest import LoopBus
from tests.integration.loop.tools import ToolBench

pytestmark = pytest.mark.integration


async def test_an_idle_engine_stops_promptly(bus: LoopBus) -> None:
    engine = await bus.engine()
    await bus.say("s1", "hello")
    await bus.turns_ended("s1", 1)
    await asyncio.sleep(1.5)  # idle on purpose: the dispatcher's fetches time out meanwhile
    started = time.monotonic()
    await engine.stop(grace_s=2)
    bus.engines.remove(engine)
    assert time.monotonic() - started < 1.0


async def test_a_turn_cut_by_shutdown_is_repaired_at_once_by_the_next_engine(
    bus: LoopBus,
) -> None:
    bench = ToolBench()
    first = await bus.engine(tools=bench.tools())
    await bus.say("s1", "call gate with {}")
    await asyncio.wait_for(bench.gate_entered.wait(), 10)
    await first.stop(grace_s=0.2)  # the gate never opens: the turn is cut
    bus.engines.remove(first)
    await bus.engine(tools=ToolBench().tools())
    started = time.monotonic()
    await bus.say("s1", "back again")
    events = await bus.turns_ended("s1", 2)
    assert time.monotonic() - started < LEASES.ttl_s / 3, "the lease was released, not expired"
    turn_one = in_turn(events, 1)
    (result,) = of_type(turn_one, "tool/result")
    assert (result.payload.synthetic, result.payload.error.code) == (True, "TOOL_OUTCOME_UNKNOWN")
    assert (turn_one[-1].payload.outcome, turn_one[-1].payload.reason) == ("failed", "interrupted")
    assert in_turn(events, 2)[-1].payload.outcome == "completed"
