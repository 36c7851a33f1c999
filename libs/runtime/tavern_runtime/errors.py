"""The one error root of AgentTavern and its three kinds (STYLE.md §5).

Permanent errors reject and dead-letter; transient ones nack with a delay; conflicts reload and
retry a bounded number of times. Only adapters catch driver exceptions and translate them here.
"""

from __future__ import annotations

from typing import Any


class TavernError(Exception):
    """Root of every error raised on purpose by AgentTavern code."""

    code: str = "error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def as_dict(self) -> dict[str, Any]:
        """A structured form for replies, results and dead-letter records."""
        return {"code": self.code, "message": self.message, **self.details}


class PermanentError(TavernError):
    """Retrying cannot help: bad input, a refused operation. Reject and dead-letter."""

    code = "permanent"


class ValidationFailed(PermanentError):
    code = "invalid"


class TransientError(TavernError):
    """A dependency is slow or away. Nack with a delay and try again."""

    code = "transient"


class ConcurrencyConflict(TavernError):
    """Someone else wrote first. Reload, decide again, retry a bounded number of times."""

    code = "conflict"


class ConfigurationError(PermanentError):
    """The process cannot run with this configuration (also: drift in provisioned resources)."""

    code = "configuration"
