"""The one error root of AgentTavern and its three kinds (STYLE.md §5).

Permanent errors reject and dead-letter; transient ones nack with a delay; conflicts reload and
retry a bounded number of times. Only adapters catch driver exceptions and translate them here.
Every error answers an RPC in the common model of `tavern_events.replies`: its `code` is one of
`ErrorCode` (a subclass may name a finer `reason`), `retryable` follows its kind.
"""

from __future__ import annotations

from typing import Any, cast

from tavern_events.replies import ERROR_CODES, ErrorCode, error_reply


class TavernError(Exception):
    """Root of every error raised on purpose by AgentTavern code."""

    code: str = "internal"
    reason: str | None = None
    retryable: bool = False

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def reply_code(self) -> ErrorCode:
        """`code` when it is one of the common codes, else the code of this error's kind."""
        if self.code in ERROR_CODES:
            return cast(ErrorCode, self.code)
        if isinstance(self, TransientError):
            return "unavailable"
        if isinstance(self, ConcurrencyConflict):
            return "conflict"
        if isinstance(self, PermanentError):
            return "invalid"
        return "internal"

    def as_dict(self) -> dict[str, Any]:
        """The error's part of a reply: `{code, message, retryable[, reason], **details}`."""
        return self.as_reply()["error"]  # type: ignore[no-any-return]

    def as_reply(self) -> dict[str, Any]:
        """The whole RPC reply, `{"error": {...}}`."""
        code = self.reply_code()
        reason = self.reason or (self.code if self.code != code else None)
        return error_reply(
            code, self.message, retryable=self.retryable, reason=reason, **self.details
        )


class PermanentError(TavernError):
    """Retrying cannot help: bad input, a refused operation. Reject and dead-letter."""

    code = "invalid"


class ValidationFailed(PermanentError):
    code = "invalid"


class Unauthenticated(PermanentError):
    """The request carries no principal, or one that is forged, malformed or expired."""

    code = "unauthenticated"


class Forbidden(PermanentError):
    """A valid principal asked for something that is not theirs (or needs the operator)."""

    code = "forbidden"


class TransientError(TavernError):
    """A dependency is slow or away. Nack with a delay and try again."""

    code = "unavailable"
    retryable = True


class ConcurrencyConflict(TavernError):
    """Someone else wrote first. Reload, decide again, retry a bounded number of times."""

    code = "conflict"
    retryable = True


class ConfigurationError(PermanentError):
    """The process cannot run with this configuration (also: drift in provisioned resources)."""

    code = "internal"
    reason = "configuration"
