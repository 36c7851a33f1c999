"""The projector's errors: subclasses of the shared roots (permanent, transient, conflict)."""

from __future__ import annotations

from tavern_runtime.errors import PermanentError, TransientError, ValidationFailed


class BadRequest(ValidationFailed):
    """An RPC request that cannot be answered as asked (the message says which field)."""

    code = "invalid"


class NotFound(PermanentError):
    code = "not_found"


class CardError(ValidationFailed):
    """A character card, lorebook or persona that cannot be imported; `field` names the culprit."""

    code = "invalid"
    reason = "invalid_card"

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}", field=field)
        self.field = field


class ProjectionBusy(TransientError):
    """Another process is rebuilding this projection; try again shortly."""

    code = "unavailable"
    reason = "projection_busy"
