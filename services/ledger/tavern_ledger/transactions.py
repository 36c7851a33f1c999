"""Transactions on the ledger's pool, with driver errors translated at the edge."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from tavern_ledger.errors import translated
from tavern_ledger.store import Conn
from tavern_runtime.pg import Pool

PoolSource = Callable[[], Pool]
"""Where the pool comes from: the service's lifespan opens it after the app is built."""


@asynccontextmanager
async def transaction(pool: PoolSource) -> AsyncIterator[Conn]:
    """A connection inside one transaction: committed on exit, rolled back on error."""
    with translated():
        async with pool().acquire() as conn, conn.transaction():
            yield conn


@asynccontextmanager
async def connection(pool: PoolSource) -> AsyncIterator[Conn]:
    """A pooled connection for reads (autocommit)."""
    with translated():
        async with pool().acquire() as conn:
            yield conn
