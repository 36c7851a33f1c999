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
SELECT DISTINCT ON (c.scope_id) c.scope_id, c.owner
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS c(scope_id, owner, position)
ORDER BY c.scope_id, c.position
ON CONFLICT (scope_id) DO NOTHING
"""
"""Inserts in key order: a scope another transaction claims and has not committed yet is waited
for (unique index), so every writer that claims several scopes claims them in this one order."""


def claimable(scope_ids: Iterable[str | None]) -> list[str]:
    """The scope ids a session claims, in key order (the global scope is nobody's)."""
    return sorted({s for s in scope_ids if s and s != "global"})


async def claim(conn: Conn, owner: str, scope_ids: Iterable[str | None]) -> None:
    """Record `owner` for each scope not claimed yet (idempotent)."""
    await claim_all(conn, [(owner, scope_ids)])


async def claim_all(conn: Conn, claims: Iterable[tuple[str, Iterable[str | None]]]) -> None:
    """Record each (owner, scopes) claim for the scopes not claimed yet, in one statement that
    takes the scopes in key order, so that two transactions claiming some of the same scopes
    (ingestion's batch, the bindings consumer's) never wait on each other in a circle. A scope
    named by several claims goes to the first."""
    pairs = [(scope, owner) for owner, ids in claims for scope in claimable(ids)]
    if pairs:
        await conn.execute(_CLAIM, [s for s, _ in pairs], [o for _, o in pairs])


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
