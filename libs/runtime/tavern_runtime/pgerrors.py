"""Postgres driver errors as the shared error kinds, and pooled connections that translate them:
the one place a service turns asyncpg's exceptions into errors that say whether retrying can
help (and carry an RPC reply code)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import asyncpg

from tavern_runtime.errors import ConcurrencyConflict, PermanentError, TavernError, TransientError
from tavern_runtime.pg import Pool


class StoreRejected(PermanentError):
    """Postgres refused the data itself (a check, an encoding, a length): retrying cannot help."""

    code = "invalid"
    reason = "store_rejected"


class StoreUnavailable(TransientError):
    """Postgres could not be reached or cancelled the statement: the same work may succeed later."""

    code = "unavailable"
    reason = "store_unavailable"


class StoreConflict(ConcurrencyConflict):
    """A serialisation failure or a deadlock: run the transaction again."""

    code = "conflict"
    reason = "store_conflict"


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
_REJECTED = (
    asyncpg.DataError,  # class 22: NUL or bad bytes, a string too long, a value out of range
    asyncpg.IntegrityConstraintViolationError,  # class 23: check, not-null, unique, foreign key
    asyncpg.ProgramLimitExceededError,  # class 54: e.g. a value too big for an index row
    UnicodeEncodeError,  # text the driver cannot send as UTF-8 (a lone surrogate)
)


_AWAY = (
    asyncpg.OperatorInterventionError,  # class 57: the server shuts down, a query is cancelled
    asyncpg.InsufficientResourcesError,  # class 53: disk full, out of memory, too many connections
)


def classify(exc: BaseException) -> TavernError | None:
    """A driver exception as the shared error it means (data errors are permanent, never
    "try again"); `None` for anything that is not a database error."""
    if isinstance(exc, TavernError):
        return exc
    if isinstance(exc, _CONFLICT):
        return StoreConflict(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, _REJECTED):
        return StoreRejected(_rejected_message(exc))
    if isinstance(exc, (*_TRANSIENT, *_AWAY)):
        return StoreUnavailable(f"{type(exc).__name__}: {exc}")
    return None  # a syntax error, a missing table: a bug of ours, `internal`


def _rejected_message(exc: BaseException) -> str:
    if isinstance(exc, UnicodeEncodeError):
        return "text that is not valid UTF-8 (a lone surrogate) cannot be stored"
    return f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Driver exceptions become `StoreConflict`, `StoreRejected` or `StoreUnavailable`."""
    try:
        yield
    except (*_CONFLICT, *_REJECTED, *_TRANSIENT) as exc:
        raise classify(exc) from exc  # type: ignore[misc]


PoolSource = Callable[[], Pool]
"""Where the pool comes from: a service's lifespan opens it after the app is built."""


@contextlib.asynccontextmanager
async def transaction(pool: PoolSource) -> AsyncIterator[Any]:
    """A connection inside one transaction: committed on exit, rolled back on error; driver
    errors come out translated."""
    with translated():
        async with pool().acquire() as conn, conn.transaction():
            yield conn


@contextlib.asynccontextmanager
async def connection(pool: PoolSource) -> AsyncIterator[Any]:
    """A pooled connection for reads (autocommit); driver errors come out translated."""
    with translated():
        async with pool().acquire() as conn:
            yield conn
