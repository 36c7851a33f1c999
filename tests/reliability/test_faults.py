"""Fault injection against the real stack, every piece a separate process: kill -9 each service
at random points of scripted conversations, kill -9 and restart nats-server, stop and restart
PostgreSQL, cut one service's network for a few seconds. After recovery, from the outside:
every input got exactly one completed or failed turn, every log is gapless and well-formed, the
chat files equal a fresh projection, the ledger's evidence equals a fresh ingestion, and no
dead letter names a session of the run.

TAVERN_FAULTS_N (default 1) sets how often each service and nats-server are killed (the other
faults run once); TAVERN_FAULTS_SEED fixes the random points and order (printed in the summary);
TAVERN_FAULTS_SESSIONS the number of conversations (default 6). After each fault a fresh
session's first turn must complete: that is "recovered", timed from the fault.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial

import pytest

from tavern_events.ids import new_id
from tests.reliability.driver import Driver
from tests.reliability.report import REPORT, table
from tests.reliability.scenario import Conversation, converse, quiesce, verify
from tests.reliability.stack import SERVICES, Stack, running_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

N = int(os.environ.get("TAVERN_FAULTS_N", "1"))
SESSIONS = int(os.environ.get("TAVERN_FAULTS_SESSIONS", "6"))
SEED = int(os.environ.get("TAVERN_FAULTS_SEED", str(random.randrange(1 << 30))))
OUTAGE_S = 3.0
RECOVERY_TIMEOUT_S = 90.0


@dataclass
class Fault:
    label: str
    act: Callable[[Stack, random.Random], Awaitable[None]]
    injected: int = 0
    recovered: int = 0
    recovery_s: list[float] = field(default_factory=list)


async def _kill_service(stack: Stack, rng: random.Random, name: str) -> None:
    await stack.kill(name)
    await asyncio.sleep(rng.uniform(0.0, 1.0))
    await stack.restart(name, ready=False)


async def _kill_nats(stack: Stack, rng: random.Random) -> None:
    await stack.kill_nats()
    await asyncio.sleep(rng.uniform(0.5, 1.5))
    await stack.start_nats()


async def _restart_postgres(stack: Stack, rng: random.Random) -> None:
    await stack.stop_postgres()
    await asyncio.sleep(rng.uniform(1.0, OUTAGE_S))
    await stack.start_postgres()


async def _cut(stack: Stack, rng: random.Random, name: str) -> None:
    stack.cut(name)
    await asyncio.sleep(rng.uniform(2.0, OUTAGE_S + 1))
    stack.restore(name)


def fault_plan() -> list[Fault]:
    plan = [Fault(f"kill -9 {name}", partial(_kill_service, name=name)) for name in SERVICES]
    plan += [
        Fault("kill -9 nats-server, restart", _kill_nats),
        Fault("stop postgres, restart", _restart_postgres),
    ]
    plan += [Fault(f"cut network of {name}", partial(_cut, name=name)) for name in SERVICES]
    return plan


@pytest.fixture(scope="module")
async def fault_stack() -> AsyncIterator[Stack]:
    """A stack of its own: nothing else runs on it, so every dead letter is a finding."""
    async with running_stack() as system:
        yield system


async def _canary(driver: Driver, started: float) -> float | None:
    """A fresh session's first turn completes: the system serves again. Seconds since `started`."""
    sent = await driver.say(f"canary-{new_id()[-10:]}", "Hello after the fault?")
    if await driver.wait(sent, RECOVERY_TIMEOUT_S) and sent.outcome == "completed":
        return time.monotonic() - started
    return None


async def _inject(stack: Stack, driver: Driver, plan: list[Fault], rng: random.Random) -> None:
    rounds = [fault for fault in plan for _ in range(N if fault.label.startswith("kill") else 1)]
    rng.shuffle(rounds)
    for fault in rounds:
        await asyncio.sleep(rng.uniform(0.3, 2.5))  # a random point of the conversations
        started = time.monotonic()
        fault.injected += 1
        await fault.act(stack, rng)
        await stack.wait_ready(timeout=RECOVERY_TIMEOUT_S)
        took = await _canary(driver, started)
        if took is not None:
            fault.recovered += 1
            fault.recovery_s.append(took)


def _summary(plan: list[Fault], verdict_rows: list[list[object]]) -> list[str]:
    rows: list[list[object]] = [
        [
            f.label,
            f.injected,
            f.recovered,
            max(f.recovery_s) if f.recovery_s else "-",
        ]
        for f in plan
    ]
    total = [
        "all faults",
        sum(f.injected for f in plan),
        sum(f.recovered for f in plan),
        max((s for f in plan for s in f.recovery_s), default="-"),
    ]
    lines = table(["fault", "injected", "recovered", "worst recovery s"], [*rows, total])
    return [
        *lines,
        "",
        *table(
            ["inputs", "lost", "doubled", "malformed", "dead letters", "unplanned exits"],
            verdict_rows,
        ),
    ]


async def test_every_input_survives_crashes_restarts_and_partitions(fault_stack: Stack) -> None:
    stack, rng, plan = fault_stack, random.Random(SEED), fault_plan()
    driver = Driver(stack.nc)  # type: ignore[arg-type]
    await driver.open()
    stop = asyncio.Event()
    conversations = [Conversation(f"fault-{i}-{new_id()[-8:]}", i) for i in range(SESSIONS)]
    talking = [asyncio.create_task(converse(driver, c, stop)) for c in conversations]
    try:
        await _inject(stack, driver, plan, rng)
    finally:
        stop.set()
        await asyncio.gather(*talking)
    lags = await quiesce(stack, driver)
    sessions = list(driver.sent)
    verdict = await verify(stack, driver, sessions)
    exits = stack.unexpected_exits()
    row: list[object] = [
        verdict.inputs,
        len(verdict.lost),
        len(verdict.doubled),
        len(verdict.problems),
        verdict.dead_letters,
        len(exits),
    ]
    REPORT.add(f"faults (N={N}, seed={SEED}, {len(sessions)} sessions)", _summary(plan, [row]))
    await driver.close()

    assert all(f.recovered == f.injected for f in plan), [(f.label, f.recovery_s) for f in plan]
    assert verdict.lost == [], verdict.lost
    assert verdict.doubled == [], verdict.doubled
    assert verdict.problems == [], verdict.problems
    assert verdict.dead_letters == 0, verdict.letter_reasons()
    assert all(v == 0 for v in lags.values()), lags
    assert exits == [], [(e.service, e.code) for e in exits]
