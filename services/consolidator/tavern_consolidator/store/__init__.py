"""asyncpg queries on the `consolidator` schema; they return domain records.

Only this package touches the driver; callers hand in a connection (inside their transaction).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from tavern_consolidator.errors import translated
from tavern_runtime.pg import Pool

Conn = Any
"""An asyncpg connection (asyncpg ships no type information)."""
PoolSource = Callable[[], Pool]


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


def to_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


def from_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
