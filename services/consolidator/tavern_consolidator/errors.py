"""The consolidator's errors: subclasses of the shared root, with the code an RPC reply carries."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import asyncpg

from tavern_runtime.errors import ConcurrencyConflict, PermanentError, TransientError


class RequestInvalid(PermanentError):
    code = "invalid_request"


class NotFound(PermanentError):
    code = "not_found"


class LedgerRefused(PermanentError):
    """The ledger answered a request with an error that retrying cannot fix."""

    code = "ledger_refused"


class LedgerUnavailable(TransientError):
    """No ledger answered (or it asked us to slow down): try the same work again later."""

    code = "ledger_unavailable"


class StoreUnavailable(TransientError):
    code = "store_unavailable"


class StoreRejected(PermanentError):
    code = "store_rejected"


class StoreConflict(ConcurrencyConflict):
    code = "store_conflict"


_TRANSIENT = (
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.QueryCanceledError,
    OSError,
    TimeoutError,
)
_CONFLICT = (asyncpg.SerializationError, asyncpg.DeadlockDetectedError)
_REJECTED = (asyncpg.DataError, asyncpg.IntegrityConstraintViolationError)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Driver exceptions become the consolidator's errors (the only place that catches them)."""
    try:
        yield
    except _CONFLICT as exc:
        raise StoreConflict(f"{type(exc).__name__}: {exc}") from exc
    except _REJECTED as exc:
        raise StoreRejected(f"{type(exc).__name__}: {exc}") from exc
    except _TRANSIENT as exc:
        raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc
