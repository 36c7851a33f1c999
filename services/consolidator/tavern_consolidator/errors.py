"""The consolidator's errors: subclasses of the shared root, with the code an RPC reply carries."""

from __future__ import annotations

from tavern_runtime.errors import PermanentError, TransientError
from tavern_runtime.pgerrors import StoreConflict as StoreConflict
from tavern_runtime.pgerrors import StoreRejected as StoreRejected
from tavern_runtime.pgerrors import StoreUnavailable as StoreUnavailable
from tavern_runtime.pgerrors import translated as translated
from tavern_runtime.rpc import RequestInvalid as RequestInvalid
from tavern_runtime.rpc import RequestTooLarge as RequestTooLarge


class NotFound(PermanentError):
    code = "not_found"


class LedgerRefused(PermanentError):
    """The ledger answered a request with an error that retrying cannot fix."""

    reason = "ledger_refused"


class LedgerUnavailable(TransientError):
    """No ledger answered (or it asked us to slow down): try the same work again later."""

    code = "unavailable"
    reason = "ledger_unavailable"
