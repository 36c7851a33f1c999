"""Graceful shutdown under load: SIGTERM to each service while conversations run. Each exits
cleanly within its grace period, having finished (the loop's turns) or returned (unacked
messages) its in-flight work: no turn is left to crash repair, nothing is lost, and nothing
redelivered shows up twice (log, chat file, evidence).
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from tavern_events.ids import new_id
from tests.reliability.driver import Driver
from tests.reliability.report import REPORT, table
from tests.reliability.scenario import Conversation, converse, quiesce, verify
from tests.reliability.stack import SERVICES, Stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SESSIONS = 12
MARGIN_S = 2.0
"""Beyond the grace period: interpreter exit, pool close."""


async def test_sigterm_during_load_finishes_or_returns_in_flight_work(stack: Stack) -> None:
    driver = Driver(stack.nc)  # type: ignore[arg-type]
    await driver.open()
    rng = random.Random(7)
    stop = asyncio.Event()
    conversations = [Conversation(f"term-{i}-{new_id()[-8:]}", i) for i in range(SESSIONS)]
    talking = [
        asyncio.create_task(converse(driver, c, stop, think_s=(0.05, 0.3))) for c in conversations
    ]
    stopped: list[tuple[str, int | None, float]] = []
    try:
        for name in SERVICES:
            await asyncio.sleep(rng.uniform(0.5, 1.5))
            started = time.monotonic()
            code = await stack.stop_service(name, timeout=stack.grace_s + MARGIN_S)
            stopped.append((name, code, time.monotonic() - started))
            await stack.restart(name)
    finally:
        stop.set()
        await asyncio.gather(*talking)
    await quiesce(stack, driver)
    sessions = [c.session_id for c in conversations]
    verdict = await verify(stack, driver, sessions)
    interrupted = [
        f"{c.session_id} turn {e.turn}"
        for c in verdict.checks
        for e in c.log
        if e.type == "turn/end" and getattr(e.payload, "reason", None) == "interrupted"
    ]
    await driver.close()
    rows = [[n, "killed" if c is None else c, f"{s:.2f}"] for n, c, s in stopped]
    lines = table(["SIGTERM to", "exit code", "exited after s"], rows)
    lines += [
        "",
        f"grace {stack.grace_s:.0f} s; inputs {verdict.inputs}, lost {len(verdict.lost)}, "
        f"doubled {len(verdict.doubled)}, malformed {len(verdict.problems)}, "
        f"turns left to crash repair {len(interrupted)}, dead letters {verdict.dead_letters}",
    ]
    REPORT.add("graceful shutdown under load", lines)

    assert [(n, c) for n, c, _ in stopped if c != 0] == []
    assert all(s <= stack.grace_s + MARGIN_S for _, _, s in stopped)
    assert verdict.lost == []
    assert verdict.doubled == []
    assert verdict.problems == []
    assert interrupted == []
    assert verdict.dead_letters == 0, verdict.letter_reasons()
