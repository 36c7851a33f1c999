"""How an OpenAI-compatible server's failures become `ProviderError`s, and how long to back off.

Pure: the clock (`now`) and the jitter are passed in.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from tavern_llm.base import ErrorCode, ProviderError, is_context_overflow

MESSAGE_LIMIT = 300
CODE_LIMIT = 64


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a `Retry-After` value: delta-seconds or an HTTP date (RFC 9110)."""
    if not value or not value.strip():
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return _seconds_until_date(value.strip(), now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _seconds_until_date(value: str, now: datetime) -> float | None:
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def retry_after_s(headers: Mapping[str, str], now: datetime) -> float | None:
    """The server's requested wait: `retry-after-ms` (OpenAI) wins over `retry-after`.

    `headers` must look keys up case-insensitively (httpx.Headers) or hold lower-case keys.
    """
    millis = parse_retry_after(headers.get("retry-after-ms"), now)
    if millis is not None:
        return millis / 1000
    return parse_retry_after(headers.get("retry-after"), now)


def backoff_delay(attempt: int, base_s: float, max_s: float, jitter: float) -> float:
    """Exponential backoff with equal jitter: attempt n waits in [c/2, c], c = base * 2^(n-1).

    `jitter` is a number in [0, 1) from the caller's random source.
    """
    ceiling = min(max_s, base_s * 2.0 ** max(0, attempt - 1))
    return ceiling / 2 + ceiling / 2 * jitter


def retry_delay(
    error: ProviderError, attempt: int, base_s: float, max_s: float, jitter: float
) -> float:
    """The wait before the next attempt: the backoff, or longer if the server asked for it."""
    return max(backoff_delay(attempt, base_s, max_s, jitter), error.retry_after_s or 0.0)


def _code_for_status(status: int) -> ErrorCode:
    if status in (401, 403):
        return "auth"
    if status in (408, 504):
        return "timeout"
    if status == 429:
        return "rate_limited"
    if status == 503:
        return "unavailable"
    return "server_error" if status >= 500 else "bad_request"


def decode_body(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def error_message(body: Any) -> str:
    """The human part of an error body, bounded (never the whole payload)."""
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        error = error.get("message") or json.dumps(error)[:MESSAGE_LIMIT]
    text = " ".join(str(error).split())
    return text[:MESSAGE_LIMIT]


def provider_code(body: Any) -> str | None:
    """The server's own error code (`error.code`, else `error.type`), bounded, or None."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None
    for key in ("code", "type"):
        value = error.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            return " ".join(str(value).split())[:CODE_LIMIT]
    return None


def _quota_exhausted(body: Any) -> bool:
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and error.get("code") == "insufficient_quota"


def error_for_response(
    status: int, body_text: str, headers: Mapping[str, str], now: datetime
) -> ProviderError:
    """The error for a non-2xx response; a billing 429 (`insufficient_quota`) is not retryable."""
    body = decode_body(body_text)
    message = f"HTTP {status}: {error_message(body)}"
    own = provider_code(body)
    if is_context_overflow(status, body):
        return ProviderError("context_overflow", message, status=status, provider_code=own)
    retryable = False if status == 429 and _quota_exhausted(body) else None
    return ProviderError(
        _code_for_status(status),
        message,
        status=status,
        retry_after_s=retry_after_s(headers, now),
        retryable=retryable,
        provider_code=own,
    )


def error_for_chunk(chunk: dict[str, Any]) -> ProviderError:
    """An error a server reported inside an SSE stream (vLLM, OpenRouter and others do)."""
    error = chunk.get("error")
    status = error.get("code") if isinstance(error, dict) else None
    status = status if isinstance(status, int) else 400
    message = f"stream error: {error_message(chunk)}"
    own = provider_code(chunk)
    if is_context_overflow(status, chunk):
        return ProviderError("context_overflow", message, status=status, provider_code=own)
    return ProviderError("server_error", message, provider_code=own)
