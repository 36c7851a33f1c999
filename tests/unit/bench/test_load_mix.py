"""The load's turns: every session goes round the four kinds, and the sessions are not in step
(a quarter of them on each kind at any turn), while the raw baseline follows the same mix."""

from __future__ import annotations

from collections import Counter

from bench.load import (
    CHAT_TURN_EVENTS,
    TOOL_TURN_EVENTS,
    line,
    raw_events,
    raw_events_per_turn,
    turn_kind,
)


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
