"""The ledger's errors: subclasses of the shared root, each with the code an RPC reply carries."""

from __future__ import annotations

from tavern_runtime.errors import PermanentError, TransientError
from tavern_runtime.pgerrors import StoreConflict as StoreConflict
from tavern_runtime.pgerrors import StoreRejected as StoreRejected
from tavern_runtime.pgerrors import StoreUnavailable as StoreUnavailable
from tavern_runtime.pgerrors import translated as translated
from tavern_runtime.rpc import RequestInvalid as RequestInvalid
from tavern_runtime.rpc import RequestTooLarge as RequestTooLarge


class RateLimited(TransientError):
    code = "rate_limited"
    reason = None


class NotFound(PermanentError):
    code = "not_found"


class InvalidTransition(PermanentError):
    """The evidence is not in a state the operation applies to."""

    code = "conflict"
    reason = "invalid_state"


class Denied(PermanentError):
    """Governance refuses the operation (authority, write gate)."""

    code = "forbidden"
    reason = "denied"
