from __future__ import annotations

import pytest

from tavern_loop.domain.guard import GENTLE_TEXT, GuardConfig, RepeatGuard, canonical_arguments


def test_canonical_arguments_sorts_keys_deeply_and_keeps_array_order() -> None:
    assert canonical_arguments('{"b": 1, "a": {"d": [2, 1], "c": 0}}') == (
        '{"a":{"c":0,"d":[2,1]},"b":1}'
    )


def test_canonical_arguments_keeps_non_json_as_a_string() -> None:
    assert canonical_arguments("not json") == '"not json"'


def test_guard_fires_exactly_at_thresholds_3_5_8() -> None:
    guard = RepeatGuard()
    fired = [guard.observe("a", "search", '{"q": "x"}') for _ in range(10)]
    at = [i + 1 for i, text in enumerate(fired) if text]
    assert at == [3, 5, 8]
    assert fired[2] == GENTLE_TEXT
    assert fired[4] is not None
    assert "- consecutive_calls: 5" in fired[4]
    assert '- arguments: {"q":"x"}' in fired[4]


def test_guard_treats_reordered_keys_as_the_same_call() -> None:
    guard = RepeatGuard()
    guard.observe("a", "t", '{"x": 1, "y": 2}')
    guard.observe("a", "t", '{"y": 2, "x": 1}')
    assert guard.observe("a", "t", '{"x":1,"y":2}') == GENTLE_TEXT


def test_guard_restarts_the_chain_on_a_different_call() -> None:
    guard = RepeatGuard()
    guard.observe("a", "t", "{}")
    guard.observe("a", "t", "{}")
    guard.observe("a", "t", '{"other": true}')
    assert guard.observe("a", "t", "{}") is None


def test_excluded_tools_are_transparent() -> None:
    guard = RepeatGuard(GuardConfig(exclude=("todo_*",)))
    guard.observe("a", "t", "{}")
    guard.observe("a", "t", "{}")
    assert guard.observe("a", "todo_write", "{}") is None
    assert guard.observe("a", "t", "{}") == GENTLE_TEXT


def test_only_a_human_message_resets_the_chain() -> None:
    guard = RepeatGuard()
    guard.observe("a", "t", "{}")
    guard.observe("a", "t", "{}")
    guard.human_message("a")
    assert guard.observe("a", "t", "{}") is None


def test_chains_are_per_agent() -> None:
    guard = RepeatGuard()
    guard.observe("a", "t", "{}")
    guard.observe("a", "t", "{}")
    assert guard.observe("b", "t", "{}") is None
    assert guard.observe("a", "t", "{}") == GENTLE_TEXT


def test_long_arguments_are_previewed_with_the_remaining_count() -> None:
    guard = RepeatGuard(GuardConfig(thresholds=(2, 3), arguments_preview_chars=10))
    raw = '{"q": "' + "x" * 50 + '"}'
    guard.observe("a", "t", raw)
    guard.observe("a", "t", raw)
    text = guard.observe("a", "t", raw)
    assert text is not None
    assert '- arguments: {"q":"xxxx… (+48 more chars)' in text


@pytest.mark.parametrize("thresholds", [(), (1, 3), (3, 3)])
def test_guard_config_refuses_bad_thresholds(thresholds: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="thresholds"):
        GuardConfig(thresholds=thresholds)
