"""The ledger's errors: subclasses of the shared root, each with the code an RPC reply carries."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import asyncpg

from tavern_runtime.errors import ConcurrencyConflict, PermanentError, TransientError


class RequestInvalid(PermanentError):
    """A malformed request: missing or ill-typed fields."""

    code = "invalid_request"


class RequestTooLarge(PermanentError):
    code = "too_large"


class RateLimited(TransientError):
    code = "rate_limited"


class NotFound(PermanentError):
    code = "not_found"


class InvalidTransition(PermanentError):
    """The evidence is not in a state the operation applies to."""

    code = "invalid_state"


class Denied(PermanentError):
    """Governance refuses the operation (authority, write gate)."""

    code = "denied"


class StoreRejected(PermanentError):
    """Postgres refused the data itself (a check, an encoding): retrying cannot help."""

    code = "store_rejected"


class StoreUnavailable(TransientError):
    code = "store_unavailable"


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
    """Turn driver exceptions into the ledger's errors (the only place that catches them)."""
    try:
        yield
    except _CONFLICT as exc:
        raise StoreConflict(f"{type(exc).__name__}: {exc}") from exc
    except _REJECTED as exc:
        raise StoreRejected(f"{type(exc).__name__}: {exc}") from exc
    except _TRANSIENT as exc:
        raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc
