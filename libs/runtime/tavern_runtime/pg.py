"""The asyncpg pool of a service: created from settings, pinged for readiness.

Errors name the host, port, user and database of the DSN, never its password.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import unquote, urlsplit

import asyncpg

from tavern_runtime.errors import ConfigurationError, TransientError
from tavern_runtime.settings import TavernSettings

Pool = Any
"""An `asyncpg.Pool` (asyncpg ships no type information)."""

POOL_KEY = "pg_pool"
"""Where a service's lifespan puts its pool in the FastStream context (`Context(POOL_KEY)`)."""

CONNECT_TIMEOUT_S = 10.0
PING_TIMEOUT_S = 2.0


class DatabaseUnavailable(TransientError):
    """Postgres cannot be reached or refused the connection."""

    code = "database_unavailable"


def describe_dsn(dsn: str) -> str:
    """`user@host:port/database` of a DSN: safe to log, no password."""
    parts = urlsplit(dsn)
    user = unquote(parts.username) if parts.username else ""
    host = parts.hostname or "localhost"
    port = parts.port or 5432
    database = parts.path.lstrip("/") or user or "postgres"
    return f"{user + '@' if user else ''}{host}:{port}/{database}"


def redact(text: str, dsn: str) -> str:
    """`text` with the DSN's password (if any) replaced by `***`."""
    password = urlsplit(dsn).password
    if not password:
        return text
    return text.replace(password, "***").replace(unquote(password), "***")


def require_dsn(settings: TavernSettings) -> str:
    if not settings.database_url:
        raise ConfigurationError(
            "TAVERN_DATABASE_URL is empty: point it at Postgres (`tavern up` sets it for you)"
        )
    return settings.database_url


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 10) -> Pool:
    """An open pool with at least one live connection, or `DatabaseUnavailable`."""
    try:
        return await asyncpg.create_pool(
            dsn, min_size=min_size, max_size=max_size, timeout=CONNECT_TIMEOUT_S
        )
    except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        reason = redact(f"{type(exc).__name__}: {exc}", dsn)
        raise DatabaseUnavailable(
            f"cannot connect to Postgres at {describe_dsn(dsn)}: {reason}",
            where=describe_dsn(dsn),
        ) from None


async def ping(pool: Pool, limit_s: float = PING_TIMEOUT_S) -> None:
    """`SELECT 1` on a pooled connection within `limit_s`; raises on any failure."""
    async with asyncio.timeout(limit_s):
        async with pool.acquire() as conn:
            await conn.fetchval("SELECT 1")


async def server_version(pool: Pool) -> str:
    async with pool.acquire() as conn:
        return str(await conn.fetchval("SHOW server_version"))
