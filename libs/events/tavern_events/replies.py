"""The error model of every RPC reply: `{"error": {"code", "message", "retryable"}}`.

One set of codes across services. `code` says what kind of failure it is and so what a caller
does (fix the request, ask someone else, wait and retry); `retryable` says whether the same
request may succeed later; `reason` is an optional finer name a service gives (`blocked`,
`turn_ended`, ...); further keys (`current_revision`, `retry_after_ms`, `field`) are details.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

ErrorCode = Literal[
    "invalid",  # the request breaks its shape or its rules: fix it, do not retry
    "not_found",  # what the request names does not exist (or not yet, if retryable)
    "conflict",  # the state moved on (a stale revision, a wrong state): reload and decide again
    "unauthenticated",  # no principal, or one whose credentials do not hold
    "forbidden",  # a known principal that may not do this
    "too_large",  # the request, or the reply it asks for, is over a size limit
    "rate_limited",  # too many requests: wait (`retry_after_ms` when known) and retry
    "unavailable",  # a dependency is away (database, another service): retry later
    "timeout",  # the work did not finish within its deadline
    "internal",  # a bug on the service's side; the log has the trace
]
ERROR_CODES: frozenset[str] = frozenset(get_args(ErrorCode))

RETRYABLE: frozenset[str] = frozenset({"rate_limited", "unavailable", "timeout"})
"""Codes whose requests may succeed unchanged later, unless the error says otherwise."""

TIMEOUT_HEADER = "Tavern-Timeout-Ms"
"""Request header: how long the caller waits for the reply, in milliseconds. A service answers
`timeout` before then rather than let the caller's wait run out in silence."""


def timeout_headers(timeout_s: float) -> dict[str, str]:
    """The headers that tell a service how long the caller waits."""
    return {TIMEOUT_HEADER: str(max(1, round(timeout_s * 1000)))}


class ErrorBody(BaseModel):
    """What went wrong; details beyond the three fields ride along as extra keys."""

    model_config = ConfigDict(frozen=True, extra="allow")

    code: ErrorCode
    message: str
    retryable: bool
    reason: str | None = None


class ErrorReply(BaseModel):
    """The whole reply of a failed request."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    error: ErrorBody


def error_reply(
    code: ErrorCode,
    message: str,
    *,
    retryable: bool | None = None,
    reason: str | None = None,
    **details: Any,
) -> dict[str, Any]:
    """A reply of the model as JSON-ready data (`retryable` defaults by code)."""
    body: dict[str, Any] = {
        "code": code,
        "message": message,
        "retryable": code in RETRYABLE if retryable is None else retryable,
    }
    if reason is not None:
        body["reason"] = reason
    return {"error": {**body, **details}}


def error_of(reply: Any) -> ErrorBody | None:
    """The error of `reply` when it is one; a reply with a malformed `error` is an `internal`
    error (a caller must not take it for a result)."""
    if not isinstance(reply, dict) or "error" not in reply:
        return None
    try:
        return ErrorReply.model_validate(reply).error
    except ValidationError:
        raw = reply.get("error")
        message = raw.get("message") if isinstance(raw, dict) else raw
        text = str(message or "malformed error")
        return ErrorBody(code="internal", message=text, retryable=False)
