"""The projector's errors: subclasses of the shared roots (permanent, transient, conflict)."""

from __future__ import annotations

from tavern_runtime.cards.errors import CardError as CardError
from tavern_runtime.errors import PermanentError, TransientError, ValidationFailed


class BadRequest(ValidationFailed):
    """An RPC request that cannot be answered as asked (the message says which field)."""

    code = "invalid"


class NotFound(PermanentError):
    code = "not_found"


class NotYours(NotFound):
    """Another user's asset: answered exactly as one that does not exist (same code, same
    message), so a reply never says it exists; the handler logs the refusal."""

    def __init__(self, message: str, asset: str) -> None:
        super().__init__(message)
        self.asset = asset


class ProjectionBusy(TransientError):
    """Another process is rebuilding this projection; try again shortly."""

    code = "unavailable"
    reason = "projection_busy"
