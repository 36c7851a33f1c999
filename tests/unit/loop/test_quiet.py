from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tavern_loop.domain.quiet import QuietSessions

T0 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_session_is_quiet_for_its_window_and_then_asked_again() -> None:
    quiet = QuietSessions()
    assert not quiet.holds("s1", T0)
    quiet.hold("s1", T0, 30)
    assert quiet.holds("s1", at(29.9))
    assert not quiet.holds("s2", at(1))
    assert not quiet.holds("s1", at(30))
    assert len(quiet) == 0  # an expired entry is dropped when asked about


def test_no_window_means_always_asked() -> None:
    quiet = QuietSessions()
    quiet.hold("s1", T0, 0)
    assert not quiet.holds("s1", T0)
    assert len(quiet) == 0


def test_holding_again_restarts_the_window() -> None:
    quiet = QuietSessions()
    quiet.hold("s1", T0, 30)
    quiet.hold("s1", at(20), 30)
    assert quiet.holds("s1", at(45))


def test_past_the_limit_expired_entries_go_first_then_the_oldest() -> None:
    quiet = QuietSessions(limit=3)
    quiet.hold("old", T0, 5)
    quiet.hold("a", at(1), 60)
    quiet.hold("b", at(2), 60)
    quiet.hold("c", at(10), 60)  # "old" has expired: it goes, the rest stay
    assert [quiet.holds(s, at(11)) for s in ("a", "b", "c")] == [True, True, True]
    quiet.hold("d", at(12), 60)  # none expired: the oldest hold ("a") goes
    assert len(quiet) == 3
    assert not quiet.holds("a", at(13))
    assert all(quiet.holds(s, at(13)) for s in ("b", "c", "d"))
