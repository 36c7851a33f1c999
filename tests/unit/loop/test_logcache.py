"""The logs runners let go: kept whole or not at all, bounded by events, continued seq by seq."""

from __future__ import annotations

from datetime import UTC, datetime

from tavern_events.message import UserMessage, UserMessagePayload
from tavern_loop.logcache import KnownLog, LogCache


def log_of(session_id: str, count: int, first: int = 1) -> list[UserMessage]:
    return [
        UserMessage(
            id=f"{session_id}-{seq}",
            session_id=session_id,
            seq=seq,
            turn=1,
            ts=datetime(2026, 1, 1, tzinfo=UTC),
            source="user",
            payload=UserMessagePayload(text=f"message {seq}"),
        )
        for seq in range(first, first + count)
    ]


def test_a_kept_log_is_taken_once() -> None:
    cache = LogCache(max_events=100)
    cache.keep("a", log_of("a", 3), stream_seq=40)
    known = cache.take("a")
    assert known is not None
    assert [e.seq for e in known.events] == [1, 2, 3]
    assert known.stream_seq == 40
    assert cache.take("a") is None
    assert (len(cache), cache.events) == (0, 0)


def test_the_least_recently_kept_logs_go_first_when_events_exceed_the_bound() -> None:
    cache = LogCache(max_events=10)
    cache.keep("a", log_of("a", 4), 4)
    cache.keep("b", log_of("b", 4), 8)
    cache.keep("a", log_of("a", 5), 12)  # kept again: now the most recent
    cache.keep("c", log_of("c", 3), 15)
    assert cache.take("b") is None
    assert cache.events == 8
    assert [cache.take(s) is not None for s in ("a", "c")] == [True, True]
    cache.keep("huge", log_of("huge", 11), 30)  # larger than the bound: not kept at all
    assert (len(cache), cache.events) == (0, 0)


def test_what_was_stored_after_a_kept_log_must_continue_it() -> None:
    known = KnownLog(tuple(log_of("a", 3)), stream_seq=9)
    assert known.extended([]) == list(known.events)
    extended = known.extended(log_of("a", 2, first=4))
    assert extended is not None
    assert [e.seq for e in extended] == [1, 2, 3, 4, 5]
    assert known.extended(log_of("a", 1, first=5)) is None  # a gap: read the log whole
    assert known.extended(log_of("a", 1, first=3)) is None  # an overlap
    assert KnownLog((), 0).extended(log_of("a", 2)) is not None
