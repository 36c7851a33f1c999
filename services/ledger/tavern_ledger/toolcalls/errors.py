"""Errors of the stores; each becomes `{"error": {"code", "message", "retryable", ...}}` in a
reply (`tavern_events.replies`), its `reason` and details inside `error`."""

from __future__ import annotations

from typing import Any

from tavern_runtime.errors import ConcurrencyConflict, PermanentError, TransientError


class StoreRefused(PermanentError):
    """A request the stores will not carry out as asked; retrying it unchanged cannot help."""

    code = "invalid"
    reason: str | None = "refused"


class Malformed(StoreRefused):
    code = "invalid"
    reason = "malformed"


class Invalid(StoreRefused):
    code = "invalid"
    reason = None


class TooLarge(StoreRefused):
    code = "too_large"
    reason = None


class NotFound(StoreRefused):
    code = "not_found"
    reason = None


class ScopeForbidden(StoreRefused):
    """The request named a scope that is not its session's (audited)."""

    code = "forbidden"
    reason = "scope_forbidden"


class ScopeUnavailable(StoreRefused):
    """The session's binding has no such scope (e.g. no character) or it is disabled."""

    code = "not_found"
    reason = "scope_unavailable"


class Blocked(StoreRefused):
    """The write gate refused the content: nothing was stored."""

    code = "invalid"
    reason = "blocked"


class TurnEnded(StoreRefused):
    """Turn-scope variables of a turn that has already ended."""

    code = "conflict"
    reason = "turn_ended"
    retryable = False


class UnknownSession(TransientError):
    """No binding for the session (yet): its `session/created` may still be on its way."""

    code = "not_found"
    reason = "unknown_session"


class RateLimited(TransientError):
    code = "rate_limited"


class DeadlineExceeded(TransientError):
    code = "timeout"
    reason = "deadline_exceeded"


class StoreUnavailable(TransientError):
    code = "unavailable"


class RevisionConflict(ConcurrencyConflict):
    """A stale or unexpected revision: reload (the reply names the current one) and retry."""

    code = "conflict"
    retryable = False  # the same expected revision fails again: reload first

    def __init__(self, message: str, *, current_revision: int, **details: Any) -> None:
        super().__init__(message, current_revision=current_revision, **details)
