"""Per-session request rate: a token bucket per session, kept in memory by each replica.

The clock is passed in (monotonic seconds), so the rules are tested without sleeping.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True)
class Bucket:
    tokens: float
    at: float


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: float = 0.0


@dataclass(frozen=True)
class RatePolicy:
    """`rate_per_s` tokens flow in up to `burst`; each request takes one."""

    rate_per_s: float = 10.0
    burst: int = 30

    def __post_init__(self) -> None:
        if self.rate_per_s <= 0 or self.burst < 1:
            raise ValueError("rate_per_s must be > 0 and burst >= 1")


def refill(bucket: Bucket, now: float, policy: RatePolicy) -> Bucket:
    elapsed = max(0.0, now - bucket.at)
    return Bucket(min(float(policy.burst), bucket.tokens + elapsed * policy.rate_per_s), now)


def take(bucket: Bucket | None, now: float, policy: RatePolicy) -> tuple[Bucket, Decision]:
    """Take one token, or say how long until one is there."""
    current = refill(bucket, now, policy) if bucket else Bucket(float(policy.burst), now)
    if current.tokens >= 1.0:
        return Bucket(current.tokens - 1.0, now), Decision(True)
    wait = (1.0 - current.tokens) / policy.rate_per_s
    return current, Decision(False, math.ceil(wait * 1000) / 1000)


class RateLimiter:
    """Buckets by key (a principal and the session it asks about), the least recently used
    forgotten beyond `max_sessions`."""

    def __init__(self, policy: RatePolicy, max_sessions: int = 10_000) -> None:
        self.policy = policy
        self._max = max_sessions
        self._buckets: OrderedDict[str, Bucket] = OrderedDict()

    def take(self, key: str, now: float) -> Decision:
        bucket, decision = take(self._buckets.get(key), now, self.policy)
        self._buckets[key] = bucket
        self._buckets.move_to_end(key)
        while len(self._buckets) > self._max:
            self._buckets.popitem(last=False)
        return decision
