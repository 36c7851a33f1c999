"""Load through the whole stack at CI size (the full 200 x 20 is `bench/load.py`): concurrent
sessions with the offline model, nothing lost or doubled, and latency and consumer lag recover
once the load stops.

TAVERN_LOAD_SESSIONS (default 24) and TAVERN_LOAD_TURNS (default 6) set the size.
"""

from __future__ import annotations

import math
import os

import pytest

from bench.load import raw_events_per_turn, run_load
from tests.reliability.report import REPORT
from tests.reliability.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SESSIONS = int(os.environ.get("TAVERN_LOAD_SESSIONS", "24"))
TURNS = int(os.environ.get("TAVERN_LOAD_TURNS", "6"))
DRAINED_WITHIN_S = 30.0
RECOVERED_FACTOR = 3.0
"""After the load, an idle turn may be at most this much slower than before it (plus 50 ms)."""


async def test_concurrent_sessions_lose_nothing_and_recover_after_the_load(stack: Stack) -> None:
    report = await run_load(stack, SESSIONS, TURNS)
    REPORT.add(f"load ({SESSIONS} sessions x {TURNS} turns, CI size)", report.lines())

    assert report.lost == []
    assert report.doubled == []
    assert report.problems == []
    assert len(report.latencies_ms) == SESSIONS * TURNS
    assert report.drained_s is not None
    assert report.drained_s <= DRAINED_WITHIN_S
    assert all(lag == 0 for lag in report.lags_after.values()), report.lags_after
    assert not math.isnan(report.latency_after_ms)
    assert report.latency_after_ms <= report.latency_before_ms * RECOVERED_FACTOR + 50
    # the raw baseline (bench/load.py, load_raw) sends no more session events than the load
    # stores: a ratio against it never flatters the stack
    assert raw_events_per_turn(SESSIONS, TURNS) <= report.session_messages_per_turn
    # three turns in four call a tool: each result is timed from its call
    assert len(report.tool_calls) == sum(report.tools.values()) > 0
