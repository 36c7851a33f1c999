from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tavern_llm.failures import (
    backoff_delay,
    error_for_chunk,
    error_for_response,
    parse_retry_after,
    retry_after_s,
    retry_delay,
)

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7.0),
        (" 1.5 ", 1.5),
        ("-3", 0.0),
        ("Sat, 01 Mar 2025 12:00:30 GMT", 30.0),
        ("Sat, 01 Mar 2025 11:59:00 GMT", 0.0),
        ("soon", None),
        ("", None),
        (None, None),
        ("nan", None),
    ],
)
def test_parse_retry_after_reads_seconds_and_http_dates(
    value: str | None, expected: float | None
) -> None:
    assert parse_retry_after(value, NOW) == expected


def test_retry_after_ms_wins_over_retry_after() -> None:
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}, NOW) == 0.25
    assert retry_after_s({"retry-after": "9"}, NOW) == 9.0
    assert retry_after_s({}, NOW) is None


def test_backoff_doubles_up_to_the_cap_with_equal_jitter() -> None:
    assert [backoff_delay(n, 0.5, 3.0, 0.0) for n in (1, 2, 3, 4, 5)] == [0.25, 0.5, 1.0, 1.5, 1.5]
    assert [backoff_delay(n, 0.5, 3.0, 1.0) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]


def test_retry_delay_honours_a_longer_retry_after() -> None:
    limited = error_for_response(429, "{}", {"retry-after": "5"}, NOW)
    assert retry_delay(limited, 1, 0.5, 20.0, 0.5) == 5.0
    assert retry_delay(limited, 6, 10.0, 20.0, 0.0) == 10.0


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [
        (401, "auth", False),
        (403, "auth", False),
        (404, "bad_request", False),
        (408, "timeout", True),
        (429, "rate_limited", True),
        (500, "server_error", True),
        (502, "server_error", True),
        (503, "unavailable", True),
        (504, "timeout", True),
    ],
)
def test_status_codes_map_to_error_codes(status: int, code: str, retryable: bool) -> None:
    error = error_for_response(status, '{"error": {"message": "nope"}}', {}, NOW)
    assert (error.code, error.retryable, error.status) == (code, retryable, status)
    assert error.message == f"HTTP {status}: nope"


def test_context_overflow_400_maps_to_context_overflow() -> None:
    body = '{"error": {"message": "too long", "code": "context_length_exceeded"}}'
    error = error_for_response(400, body, {}, NOW)
    assert (error.code, error.retryable) == ("context_overflow", False)


def test_exhausted_quota_429_is_not_retryable() -> None:
    body = '{"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}'
    error = error_for_response(429, body, {}, NOW)
    assert (error.code, error.retryable) == ("rate_limited", False)


def test_error_message_is_bounded_and_tolerates_non_json() -> None:
    error = error_for_response(502, "<html>" + "x" * 5000, {}, NOW)
    assert error.code == "server_error"
    assert len(error.message) < 320


def test_errors_inside_a_stream_are_recognised() -> None:
    overflow = error_for_chunk({"error": {"message": "maximum context length is 8192 tokens"}})
    assert overflow.code == "context_overflow"
    assert (
        error_for_chunk({"error": {"message": "engine died", "code": 500}}).code == "server_error"
    )
