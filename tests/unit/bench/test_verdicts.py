"""A bench row judges its goals on the median of its runs: a ratio against its baseline and
absolute limits (latency ceilings, a rate floor)."""

from __future__ import annotations

from typing import Any

from bench.registry import Bench, Env, Limits, Result, Row
from bench.run import verdict


async def _never(env: Env, n: int) -> Result:
    raise AssertionError("not measured here")


def _row(limits: Limits | None, goal: float | None, *results: Result) -> Row:
    bench = Bench("f", _never, ("default",), 1, "a figure", "b", goal, limits)
    return Row(bench, "default", list(results))


def _run(seconds: float, *latencies: Any) -> Result:
    return Result(100, seconds, tuple(latencies))


def test_latency_ceilings_are_judged_on_the_median_run() -> None:
    row = _row(Limits(p50_ms=10, p99_ms=30), None, _run(1, 9, 9, 40), _run(1, 11, 11, 12))
    # p50 per run: 9 and 11 -> median 10 (met); p99 per run: 40 and 12 -> median 26 (met)
    assert verdict(row, (0.5, "b@default")) == "p50 ≤10 ms met, p99 ≤30 ms met"
    slow = _row(Limits(p50_ms=10), None, _run(1, 12, 12, 12))
    assert verdict(slow, None) == "p50 ≤10 ms MISSED"


def test_a_rate_floor_and_a_ratio_goal_are_both_reported() -> None:
    row = _row(Limits(rate=20_000), 0.5, _run(0.02), _run(0.01), _run(0.05))  # median 5,000/s
    assert verdict(row, (0.6, "b@default")) == "goal ≥0.50 met, ≥20,000/s MISSED"


def test_a_row_without_goals_says_nothing() -> None:
    assert verdict(_row(None, None, _run(1, 5)), (1.0, "b@default")) == ""
