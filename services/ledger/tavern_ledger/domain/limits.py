"""RPC limits: a token bucket per caller key (the clock is passed in) and hard caps."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True)
class Caps:
    max_request_bytes: int = 512 * 1024
    max_reply_bytes: int = 900 * 1024
    max_results: int = 200
    max_query_chars: int = 4000
    max_text_chars: int = 8000


class RateLimiter:
    """`rate` requests per second per key with bursts up to `burst`; keeps the most recently
    seen `capacity` keys (an idle key starts again with a full bucket)."""

    def __init__(self, rate: float, burst: int, capacity: int = 10_000) -> None:
        self._rate, self._burst, self._capacity = rate, float(burst), capacity
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def allow(self, key: str, now: float) -> bool:
        tokens, last = self._buckets.pop(key, (self._burst, now))
        tokens = min(self._burst, tokens + (now - last) * self._rate)
        allowed = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        if len(self._buckets) > self._capacity:
            self._buckets.popitem(last=False)
        return allowed
