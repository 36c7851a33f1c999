"""The load's turns: every session goes round the four kinds, and the sessions are not in step
(a quarter of them on each kind at any turn), while the raw baseline follows the same mix; and
how the load times its tool calls."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from bench.load import (
    CHAT_TURN_EVENTS,
    TOOL_TURN_EVENTS,
    ToolTimes,
    line,
    raw_events,
    raw_events_per_turn,
    tool_lines,
    tool_summary,
    tool_times,
    turn_kind,
)
from tavern_events.ids import new_id
from tavern_events.tool import ToolCall, ToolCallPayload, ToolResult, ToolResultPayload


def test_each_session_says_each_kind_once_in_four_turns() -> None:
    for session in range(7):
        assert sorted(turn_kind(session, turn) for turn in range(4)) == [0, 1, 2, 3]
        assert len({line(session, turn) for turn in range(4)}) == 4


def test_at_any_turn_the_sessions_are_spread_over_the_kinds() -> None:
    for turn in range(5):
        spread = Counter(turn_kind(session, turn) for session in range(200))
        assert spread == {0: 50, 1: 50, 2: 50, 3: 50}


def test_the_raw_baseline_appends_what_the_same_turn_of_the_load_appends() -> None:
    said = {(s, t): (line(s, t).split()[0], raw_events(s, t)) for s, t in [(0, 0), (1, 0), (3, 1)]}
    assert said == {
        (0, 0): ("Hello", CHAT_TURN_EVENTS),
        (1, 0): ("remember", TOOL_TURN_EVENTS),
        (3, 1): ("Hello", CHAT_TURN_EVENTS),
    }
    expected = (CHAT_TURN_EVENTS + 3 * TOOL_TURN_EVENTS) / 4
    assert raw_events_per_turn(200, 20) == expected
    assert raw_events_per_turn(3, 20) == expected  # 20 turns: every session says each kind 5x


def _at(ms: int) -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


def _call(call_id: str, ms: int, seq: int) -> ToolCall:
    payload = ToolCallPayload(call_id=call_id, name="memory_write")
    return ToolCall(id=new_id(), session_id="s-1", seq=seq, ts=_at(ms), payload=payload)


def _result(call_id: str, ms: int, seq: int, ran_ms: int | None) -> ToolResult:
    payload = ToolResultPayload(
        call_id=call_id, name="memory_write", ok=True, content="ok", duration_ms=ran_ms
    )
    return ToolResult(id=new_id(), session_id="s-1", seq=seq, ts=_at(ms), payload=payload)


def test_a_tool_call_is_timed_from_its_call_to_its_result_beside_what_the_tool_took() -> None:
    log = [
        _call("a", 1_000, 1),
        _call("b", 1_050, 2),
        _result("b", 1_300, 3, 40),
        _result("a", 4_250, 4, 200),
        _result("orphan", 5_000, 5, 10),  # its call is not in this log: not counted
        _call("open", 6_000, 6),  # no result yet: not counted
    ]
    assert tool_times(log) == [ToolTimes(250.0, 40), ToolTimes(3_250.0, 200)]
    assert tool_times([]) == []


def test_the_load_prints_its_tool_calls_as_it_keeps_them() -> None:
    calls = [ToolTimes(250.0, 40), ToolTimes(3_250.0, None), ToolTimes(1_000.0, 200)]
    assert tool_summary(calls) == {
        "calls": 3,
        "between_p50": 1_000.0,
        "between_p99": 3_250.0,
        "ran_p50": 40.0,  # of the two calls whose results say what the tool took
        "ran_p99": 200.0,
    }
    (printed,) = tool_lines(calls)
    assert "p50 1000 ms, p99 3250 ms; the tool itself ran p50 40 ms, p99 200 ms" in printed
    assert tool_summary([]) == {}
    assert tool_lines([]) == []
