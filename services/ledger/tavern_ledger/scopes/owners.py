"""`ledger.scope_owner` and the owners of sessions: who the scopes and sessions belong to.

A scope is claimed by the first session that names it (its chat, its own agent scope, its
character); claims never move, so a session of another owner that names the scope later is
refused it instead of sharing it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Conn = Any
"""An asyncpg connection (asyncpg ships no type information)."""

_CLAIM = """
INSERT INTO ledger.scope_owner (scope_id, owner)
SELECT s, $1 FROM unnest($2::text[]) AS s
ON CONFLICT (scope_id) DO NOTHING
"""


def claimable(scope_ids: Iterable[str | None]) -> list[str]:
    """The scope ids a session claims, in key order (the global scope is nobody's)."""
    return sorted({s for s in scope_ids if s and s != "global"})


async def claim(conn: Conn, owner: str, scope_ids: Iterable[str | None]) -> None:
    """Record `owner` for each scope not claimed yet (idempotent)."""
    ids = claimable(scope_ids)
    if ids:
        await conn.execute(_CLAIM, owner, ids)


async def of_scope(conn: Conn, scope_id: str) -> str | None:
    found = await conn.fetchval(
        "SELECT owner FROM ledger.scope_owner WHERE scope_id = $1", scope_id
    )
    return str(found) if found is not None else None


async def of_session(conn: Conn, session_id: str) -> str | None:
    """The session's owner from its binding, else from ingestion's record of its creation."""
    found = await conn.fetchval(
        "SELECT owner FROM ledger.session_binding WHERE session_id = $1", session_id
    )
    if found is None:
        found = await conn.fetchval(
            "SELECT owner FROM ledger.ingest_session WHERE session_id = $1", session_id
        )
    return str(found) if found is not None else None
