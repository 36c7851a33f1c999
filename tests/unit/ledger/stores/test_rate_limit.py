"""Per-session token buckets, with the clock passed in (pure)."""

from __future__ import annotations

import pytest

from tavern_ledger.domain.store_ratelimit import RateLimiter, RatePolicy


def test_burst_is_allowed_then_requests_wait_for_refill() -> None:
    limiter = RateLimiter(RatePolicy(rate_per_s=2.0, burst=3))
    assert [limiter.take("s1", 0.0).allowed for _ in range(3)] == [True, True, True]
    refused = limiter.take("s1", 0.0)
    assert (refused.allowed, refused.retry_after_s) == (False, 0.5)
    assert limiter.take("s1", 0.5).allowed
    assert not limiter.take("s1", 0.5).allowed


def test_sessions_have_their_own_buckets() -> None:
    limiter = RateLimiter(RatePolicy(rate_per_s=1.0, burst=1))
    assert limiter.take("s1", 0.0).allowed
    assert not limiter.take("s1", 0.0).allowed
    assert limiter.take("s2", 0.0).allowed


def test_refill_never_exceeds_the_burst() -> None:
    limiter = RateLimiter(RatePolicy(rate_per_s=10.0, burst=2))
    limiter.take("s1", 0.0)
    allowed = [limiter.take("s1", 100.0).allowed for _ in range(3)]
    assert allowed == [True, True, False]


def test_least_recently_used_sessions_are_forgotten_beyond_the_bound() -> None:
    limiter = RateLimiter(RatePolicy(rate_per_s=0.001, burst=1), max_sessions=2)
    for session in ("a", "b", "c"):
        assert limiter.take(session, 0.0).allowed
    assert limiter.take("a", 0.0).allowed  # "a" was evicted: a fresh bucket


def test_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="rate_per_s"):
        RatePolicy(rate_per_s=0, burst=1)
