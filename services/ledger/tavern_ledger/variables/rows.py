"""asyncpg queries of `ledger.variable_scope` and `ledger.variable`.

Every change locks its scope row first (`FOR UPDATE`), so concurrent writers of one scope
queue there and each sees the revision the previous one committed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tavern_ledger.domain.scopes import ScopeKey
from tavern_ledger.domain.variables import Plan, ScopeState, Stored
from tavern_ledger.scopes.bindings import Conn

_KEY = "scope = $1 AND scope_id = $2 AND turn = $3"


@dataclass(frozen=True)
class Variable:
    name: str
    value: Any
    revision: int
    size: int
    updated_at: datetime


def _key(key: ScopeKey) -> tuple[str, str, int]:
    return key.scope, key.scope_id, key.turn


async def lock_scope(conn: Conn, key: ScopeKey) -> ScopeState:
    """Create the scope row if needed and lock it for the rest of the transaction."""
    await conn.execute(
        "INSERT INTO ledger.variable_scope (scope, scope_id, turn) VALUES ($1, $2, $3) "
        "ON CONFLICT DO NOTHING",
        *_key(key),
    )
    row = await conn.fetchrow(
        f"SELECT revision, total_bytes FROM ledger.variable_scope WHERE {_KEY} FOR UPDATE",
        *_key(key),
    )
    return ScopeState(int(row["revision"]), int(row["total_bytes"]))


async def scope_state(conn: Conn, key: ScopeKey) -> ScopeState:
    row = await conn.fetchrow(
        f"SELECT revision, total_bytes FROM ledger.variable_scope WHERE {_KEY}", *_key(key)
    )
    return ScopeState(int(row["revision"]), int(row["total_bytes"])) if row else ScopeState()


async def stored(conn: Conn, key: ScopeKey, names: Sequence[str]) -> dict[str, Stored]:
    rows = await conn.fetch(
        f"SELECT name, revision, size_bytes FROM ledger.variable WHERE {_KEY} "
        "AND name = ANY($4::text[])",
        *_key(key),
        list(names),
    )
    return {r["name"]: Stored(r["name"], int(r["revision"]), int(r["size_bytes"])) for r in rows}


async def apply(conn: Conn, key: ScopeKey, plan: Plan, session_id: str, now: datetime) -> None:
    """Write a plan inside the transaction that locked the scope."""
    await conn.executemany(
        "INSERT INTO ledger.variable (scope, scope_id, turn, name, value, size_bytes, revision, "
        "updated_at, session_id) VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9) "
        "ON CONFLICT (scope, scope_id, turn, name) DO UPDATE SET value = EXCLUDED.value, "
        "size_bytes = EXCLUDED.size_bytes, revision = EXCLUDED.revision, "
        "updated_at = EXCLUDED.updated_at, session_id = EXCLUDED.session_id",
        [
            (*_key(key), w.name, json.dumps(w.value), w.size, plan.revision, now, session_id)
            for w in plan.writes
        ],
    )
    await conn.execute(
        f"DELETE FROM ledger.variable WHERE {_KEY} AND name = ANY($4::text[])",
        *_key(key),
        [r.name for r in plan.removals],
    )
    await conn.execute(
        f"UPDATE ledger.variable_scope SET revision = $4, total_bytes = $5, updated_at = $6 "
        f"WHERE {_KEY}",
        *_key(key),
        plan.revision,
        plan.total_bytes,
        now,
    )


def _variable(row: Any) -> Variable:
    return Variable(
        row["name"],
        json.loads(row["value"]),
        int(row["revision"]),
        int(row["size_bytes"]),
        row["updated_at"],
    )


async def get(conn: Conn, key: ScopeKey, name: str) -> Variable | None:
    row = await conn.fetchrow(
        "SELECT name, value, revision, size_bytes, updated_at FROM ledger.variable "
        f"WHERE {_KEY} AND name = $4",
        *_key(key),
        name,
    )
    return _variable(row) if row is not None else None


async def listing(conn: Conn, key: ScopeKey, prefix: str, limit: int) -> tuple[list[Variable], int]:
    """Up to `limit` variables whose name starts with `prefix`, by name; and how many match."""
    pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = await conn.fetch(
        "SELECT name, value, revision, size_bytes, updated_at, count(*) OVER () AS matching "
        f'FROM ledger.variable WHERE {_KEY} AND name LIKE $4 ORDER BY name COLLATE "C" '
        "LIMIT $5",
        *_key(key),
        pattern,
        limit,
    )
    total = int(rows[0]["matching"]) if rows else 0
    return [_variable(r) for r in rows], total
