"""The load's per-turn cost sheet on a tiny load through real servers: every process, stream
and database counter it reports was measured, none left at zero."""

from __future__ import annotations

import json

import pytest

from bench.costsheet import enable_statement_stats
from bench.load import run_load
from tests.reliability.stack import SERVICES, Stack

pytestmark = [pytest.mark.e2e]

SESSIONS, TURNS = 3, 4


async def test_cost_sheet_measures_every_process_stream_and_the_database() -> None:
    stack = Stack(proxied=False)
    try:
        await enable_statement_stats(stack)
        await stack.start()
        report = await run_load(stack, SESSIONS, TURNS)
    except BaseException:
        print(stack.tails())
        raise
    finally:
        await stack.close()
        stack.remove()
    cost = report.cost

    assert cost.turns == SESSIONS * TURNS
    assert set(cost.cpu_ms) == {*SERVICES, "nats-server", "postgres"}
    # /proc counts CPU in 10 ms ticks: a process that did little in this tiny load (the
    # consolidator coalesces its wakes) may read 0; the ones every turn passes through may not.
    assert all(cost.cpu_ms[name] > 0 for name in ("loop", "ledger", "projector", "nats-server"))
    assert all(ms >= 0 for ms in cost.cpu_ms.values()), cost.cpu_ms
    # and what they did after the last turn, until every consumer had caught up, beside it
    assert set(cost.catch_up_ms) == set(cost.cpu_ms)
    assert all(ms >= 0 for ms in cost.catch_up_ms.values()), cost.catch_up_ms
    assert cost.catch_up_s > 0
    assert cost.streams["SESSIONS"][0] >= 10, cost.streams  # a turn appends a dozen events
    messages, size = cost.streams["INPUTS"]  # per turn
    assert messages == 1.0, cost.streams
    assert size > 0
    assert cost.bus["in_msgs"] > cost.streams["SESSIONS"][0]  # RPCs and acks ride the bus too
    assert all(cost.clients[name]["out_msgs"] > 0 for name in SERVICES), cost.clients
    # Postgres reports commits and WAL fsyncs when its backends flush their statistics, which
    # may come after a run this short: the counts are measured, their sizes are not asserted
    # (the WAL bytes and the statements below are exact at once).
    assert cost.database["xact_commit"] >= 0
    assert cost.database["wal_sync"] >= 0
    assert cost.database["wal_bytes"] > 0
    assert cost.statements is not None
    assert cost.statements.get("ledger", 0) > 0
    assert cost.statements.get("projector", 0) > 0
    lagged = {name for point in cost.lags for name in point.lags}
    assert lagged == set(cost.consumers)
    assert set(cost.consumers.values()) <= set(SERVICES)
    json.dumps(cost.as_json())  # kept in the bench's JSON output
    assert any(line.startswith("cost per turn") for line in report.lines())
