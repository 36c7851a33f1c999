"""The asyncpg pool of a service: created from settings, pinged for readiness.

Errors name the host, port, user and database of the DSN, never its password.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

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

    code = "unavailable"
    reason = "database_unavailable"


def describe_dsn(dsn: str) -> str:
    """`user@host:port/database` of a DSN: safe to log, no password. A Unix socket's
    directory (`?host=/dir`) stands for the host."""
    parts = urlsplit(dsn)
    query = parse_qs(parts.query)
    user = unquote(parts.username) if parts.username else ""
    host = parts.hostname or (query.get("host") or ["localhost"])[0]
    port = parts.port or int((query.get("port") or ["5432"])[0])
    database = parts.path.lstrip("/") or user or "postgres"
    return f"{user + '@' if user else ''}{host}:{port}/{database}"


def with_database(dsn: str, database: str) -> str:
    """`dsn` naming another database on the same server, its query (a Unix socket's directory,
    say) kept."""
    return urlunsplit(urlsplit(dsn)._replace(path=f"/{database}"))


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


_SESSION_STATE: set[int] = set()
"""Server pids of pooled connections that took session state (a session advisory lock)."""


def holds_session_state(conn: Any) -> None:
    """Say that `conn` (pooled) takes session state beyond a transaction: when it goes back to
    the pool, the pool resets its session in full. Call it before taking a session lock."""
    _SESSION_STATE.add(conn.get_server_pid())


async def _reset_when_marked(conn: Any) -> None:
    """What the pool does to a connection coming back, after asyncpg has rolled back any open
    transaction: nothing, unless `holds_session_state` marked it. The services keep no session
    state otherwise (no SET, LISTEN or cursors outside transactions), so the reset query's
    round trip would only delay every request that releases a connection before it answers
    (recall spent 0.4 ms of its 3 ms on it)."""
    pid = conn.get_server_pid()
    if pid in _SESSION_STATE:
        _SESSION_STATE.discard(pid)
        await conn.execute(conn.get_reset_query())


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 10) -> Pool:
    """An open pool with at least one live connection, or `DatabaseUnavailable`."""
    try:
        return await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=CONNECT_TIMEOUT_S,
            reset=_reset_when_marked,
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
