"""The consolidator's audit trail (who, when, why, with what data)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tavern_consolidator.store import Conn, from_json, to_json


@dataclass(frozen=True)
class Entry:
    op: str
    scope_id: str
    actor: str
    reason: str = ""
    target_id: str | None = None
    payload: dict[str, Any] | None = None


async def append(conn: Conn, e: Entry) -> int:
    found = await conn.fetchval(
        "INSERT INTO consolidator.audit (op, scope_id, target_id, actor, reason, payload) "
        "VALUES ($1, $2, $3, $4, $5, $6::jsonb) RETURNING id",
        e.op,
        e.scope_id,
        e.target_id,
        e.actor,
        e.reason,
        to_json(e.payload),
    )
    return int(found)


async def query(
    conn: Conn, scope_id: str | None, op: str | None, limit: int = 50
) -> list[dict[str, Any]]:
    found = await conn.fetch(
        "SELECT id, ts, op, scope_id, target_id, actor, reason, payload FROM consolidator.audit "
        "WHERE ($1::text IS NULL OR scope_id = $1) AND ($2::text IS NULL OR op = $2) "
        "ORDER BY id DESC LIMIT $3",
        scope_id,
        op,
        limit,
    )
    return [
        {**dict(r), "ts": r["ts"].isoformat(), "payload": from_json(r["payload"])} for r in found
    ]
