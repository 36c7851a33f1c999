"""The ordered batch consumer's retry backoff (pure)."""

from __future__ import annotations

from tavern_runtime.batchconsumer import MAX_RETRY_DELAY_S, retry_delay


def test_retry_delay_doubles_per_delivery_up_to_a_minute() -> None:
    assert [retry_delay(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert retry_delay(30) == MAX_RETRY_DELAY_S
    assert retry_delay(0) == 1.0
