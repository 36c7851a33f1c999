"""The pull loop's gathering window: short while few sessions are live, long under a fleet."""

from __future__ import annotations

from tavern_projector.consumer import BUSY_KEYS, window

QUIET, BUSY = 0.01, 0.1


def _turn(session: str) -> list[str]:
    kinds = ("turn.start", "user.message", "step.start", "assistant.message", "turn.end")
    return [f"tavern.session.{session}.{kind}" for kind in kinds]


def test_one_session_keeps_the_short_window_however_many_events() -> None:
    assert window(_turn("s1") * 40, QUIET, BUSY) == QUIET


def test_fewer_sessions_than_busy_keys_keep_the_short_window() -> None:
    subjects = [s for n in range(BUSY_KEYS - 1) for s in _turn(f"s{n}")]
    assert window(subjects, QUIET, BUSY) == QUIET


def test_busy_keys_sessions_in_one_batch_widen_the_window() -> None:
    subjects = [s for n in range(BUSY_KEYS) for s in _turn(f"s{n}")]
    assert window(subjects, QUIET, BUSY) == BUSY


def test_ledger_facts_count_their_users() -> None:
    one_user = [f"tavern.ledger.u1.memory.changed.{n}" for n in range(10)]
    many = [f"tavern.ledger.u{n}.memory.changed" for n in range(BUSY_KEYS)]
    assert window(one_user, QUIET, BUSY) == QUIET
    assert window(many, QUIET, BUSY) == BUSY


def test_short_subjects_are_their_own_key() -> None:
    assert window(["a", "b"], QUIET, BUSY) == QUIET
    assert window(["a", "b", "c.d"], QUIET, BUSY) == BUSY
