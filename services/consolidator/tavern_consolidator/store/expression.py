"""Expression candidates the consolidator proposed: their last known state and decision, and
whether the approval request was surfaced to a session yet."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tavern_consolidator.store import Conn, from_json, to_json

COLUMNS = (
    "candidate_id, scope_id, evidence_ids, state, decision, reason, policy, surfaced_at, "
    "created_at, updated_at"
)


def _view(r: Any) -> dict[str, Any]:
    data = dict(r)
    data["evidence_ids"] = list(data["evidence_ids"])
    data["policy"] = from_json(data["policy"])
    for key in ("surfaced_at", "created_at", "updated_at"):
        data[key] = data[key].isoformat() if data[key] else None
    return data


async def save(
    conn: Conn, candidate: dict[str, Any], decision: str, reason: str, policy: Any
) -> None:
    await conn.execute(
        f"INSERT INTO consolidator.expression ({COLUMNS}) VALUES "
        "($1, $2, $3, $4, $5, $6, $7::jsonb, NULL, now(), now()) ON CONFLICT (candidate_id) "
        "DO UPDATE SET state = excluded.state, decision = excluded.decision, "
        "reason = excluded.reason, updated_at = now(), "
        "policy = coalesce(excluded.policy, consolidator.expression.policy)",
        candidate["candidate_id"],
        candidate["scope_id"],
        list(candidate["evidence_ids"]),
        candidate["state"],
        decision,
        reason,
        to_json(policy),
    )


async def conflicting(conn: Conn, scope_id: str, candidate_id: str) -> int:
    found = await conn.fetchval(
        "SELECT count(*) FROM consolidator.expression WHERE scope_id = $1 "
        "AND candidate_id <> $2 AND state IN ('proposed', 'promoted')",
        scope_id,
        candidate_id,
    )
    return int(found)


async def waiting(conn: Conn, session_id: str) -> tuple[str, bool]:
    """The session's scope (as `facts.scope_of_session`), and whether it has approval
    requests not yet shown, in one statement."""
    r = await conn.fetchrow(
        "SELECT s.scope, EXISTS (SELECT 1 FROM consolidator.expression WHERE scope_id = s.scope "
        "AND state = 'proposed' AND decision = 'hold' AND surfaced_at IS NULL) AS waiting "
        "FROM (SELECT coalesce(nullif((SELECT scope_id FROM consolidator.session "
        "WHERE session_id = $1), ''), $1) AS scope) AS s",
        session_id,
    )
    return str(r["scope"]), bool(r["waiting"])


async def surface(conn: Conn, scope_id: str, now: datetime, limit: int) -> list[dict[str, Any]]:
    """Take the scope's pending approval requests not yet shown, and mark them shown."""
    found = await conn.fetch(
        "UPDATE consolidator.expression SET surfaced_at = $2 WHERE candidate_id IN ("
        "SELECT candidate_id FROM consolidator.expression WHERE scope_id = $1 "
        "AND state = 'proposed' AND decision = 'hold' AND surfaced_at IS NULL "
        f"ORDER BY created_at LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING {COLUMNS}",
        scope_id,
        now,
        limit,
    )
    return [_view(r) for r in found]


async def listed(
    conn: Conn, scope_id: str | None, states: Sequence[str] | None
) -> list[dict[str, Any]]:
    found = await conn.fetch(
        f"SELECT {COLUMNS} FROM consolidator.expression WHERE ($1::text IS NULL OR scope_id = $1) "
        "AND ($2::text[] IS NULL OR state = ANY($2::text[])) ORDER BY created_at, candidate_id",
        scope_id,
        list(states) if states else None,
    )
    return [_view(r) for r in found]


async def scope_of(conn: Conn, candidate_id: str) -> str | None:
    found = await conn.fetchval(
        "SELECT scope_id FROM consolidator.expression WHERE candidate_id = $1", candidate_id
    )
    return str(found) if found is not None else None
