"""Postgres driver errors as the shared error kinds, and pooled connections that translate them:
the one place a service turns asyncpg's exceptions into errors that say whether retrying can
help (and carry an RPC reply code)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import asyncpg

from tavern_runtime.errors import ConcurrencyConflict, PermanentError, TransientError
from tavern_runtime.pg import Pool


class StoreRejected(PermanentError):
    """Postgres refused the data itself (a check, an encoding): retrying cannot help."""

    code = "store_rejected"


class StoreUnavailable(TransientError):
    """Postgres could not be reached or cancelled the statement: the same work may succeed later."""

    code = "store_unavailable"


class StoreConflict(ConcurrencyConflict):
    """A serialisation failure or a deadlock: run the transaction again."""

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
    """Driver exceptions become `StoreConflict`, `StoreRejected` or `StoreUnavailable`."""
    try:
        yield
    except _CONFLICT as exc:
        raise StoreConflict(f"{type(exc).__name__}: {exc}") from exc
    except _REJECTED as exc:
        raise StoreRejected(f"{type(exc).__name__}: {exc}") from exc
    except _TRANSIENT as exc:
        raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc


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
