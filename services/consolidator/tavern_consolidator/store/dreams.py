"""Dreaming's tables: the candidate pool, the run ledger and the cold marks (never deletes)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tavern_consolidator.domain.dreaming import DreamPlan, PoolEntry
from tavern_consolidator.store import Conn

POOL_COLUMNS = (
    "id, scope_id, state, claim_domain, subject, text, observation_ids, evidence_ids, sessions, "
    "days, occurrences, first_seen, last_seen"
)


def entry_row(r: Any) -> PoolEntry:
    data = dict(r)
    for key in ("observation_ids", "evidence_ids", "sessions"):
        data[key] = tuple(data[key] or ())
    return PoolEntry(**data)


def entry_view(e: PoolEntry) -> dict[str, Any]:
    return {
        "id": e.id,
        "scope_id": e.scope_id,
        "state": e.state,
        "claim_domain": e.claim_domain,
        "subject": e.subject,
        "text": e.text,
        "observation_ids": list(e.observation_ids),
        "evidence_ids": list(e.evidence_ids),
        "sessions": list(e.sessions),
        "days": e.days,
        "occurrences": e.occurrences,
        "first_seen": e.first_seen.isoformat(),
        "last_seen": e.last_seen.isoformat(),
    }


async def states(conn: Conn, ids: Sequence[str]) -> dict[str, str]:
    found = await conn.fetch(
        "SELECT id, state FROM consolidator.candidate_memory WHERE id = ANY($1::text[])", list(ids)
    )
    return {r["id"]: r["state"] for r in found}


async def upsert(conn: Conn, entries: Sequence[PoolEntry]) -> tuple[int, int]:
    """Insert new pool rows, refresh the others (their state is already reconciled)."""
    inserted = 0
    for e in entries:
        fresh = await conn.fetchval(
            f"INSERT INTO consolidator.candidate_memory ({POOL_COLUMNS}) VALUES "
            "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (id) DO UPDATE "
            "SET state = CASE WHEN candidate_memory.state IN ('approved', 'rejected') "
            "THEN candidate_memory.state ELSE excluded.state END, text = excluded.text, "
            "evidence_ids = excluded.evidence_ids, sessions = excluded.sessions, "
            "days = excluded.days, occurrences = excluded.occurrences, "
            "first_seen = excluded.first_seen, last_seen = excluded.last_seen, updated_at = now() "
            "RETURNING (xmax = 0)",
            e.id,
            e.scope_id,
            e.state,
            e.claim_domain,
            e.subject,
            e.text,
            list(e.observation_ids),
            list(e.evidence_ids),
            list(e.sessions),
            e.days,
            e.occurrences,
            e.first_seen,
            e.last_seen,
        )
        inserted += bool(fresh)
    return inserted, len(entries) - inserted


async def record_run(conn: Conn, plan: DreamPlan, window: tuple[datetime | None, datetime]) -> int:
    found = await conn.fetchval(
        "INSERT INTO consolidator.dream_run (scope_id, window_from, window_to, scanned, "
        "clustered, promoted, archived, dry_run, note) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, false, 'dream P1: cluster/occurrence/archive') "
        "RETURNING id",
        plan.scope_id,
        window[0],
        window[1],
        plan.scanned,
        len(plan.entries),
        plan.consensus,
        len(plan.forget.observations) + len(plan.forget.evidence),
    )
    return int(found)


async def mark_cold(conn: Conn, plan: DreamPlan, run_id: int) -> None:
    rows = [("observation", i) for i in plan.forget.observations]
    rows += [("evidence", i) for i in plan.forget.evidence]
    await conn.executemany(
        "INSERT INTO consolidator.forget_mark (kind, target_id, scope_id, run_id) "
        "VALUES ($1, $2, $3, $4) ON CONFLICT (kind, target_id) DO NOTHING",
        [(kind, target, plan.scope_id, run_id) for kind, target in rows],
    )


async def pool(
    conn: Conn, scope_id: str | None, domain: str | None, state: str | None, limit: int = 200
) -> list[PoolEntry]:
    found = await conn.fetch(
        f"SELECT {POOL_COLUMNS} FROM consolidator.candidate_memory "
        "WHERE ($1::text IS NULL OR scope_id = $1) AND ($2::text IS NULL OR claim_domain = $2) "
        "AND ($3::text IS NULL OR state = $3) ORDER BY scope_id, claim_domain, first_seen, id "
        "LIMIT $4",
        scope_id,
        domain,
        state,
        limit,
    )
    return [entry_row(r) for r in found]


async def holding(conn: Conn, observation_ids: Sequence[str]) -> list[PoolEntry]:
    """Pool rows that contain any of these observations (the profile's support)."""
    found = await conn.fetch(
        f"SELECT {POOL_COLUMNS} FROM consolidator.candidate_memory "
        "WHERE observation_ids && $1::text[]",
        list(observation_ids),
    )
    return [entry_row(r) for r in found]


async def decide(conn: Conn, ids: Sequence[str], state: str, actor: str) -> list[dict[str, Any]]:
    """Set a human decision on pool rows; returns each row's before/after."""
    found = await conn.fetch(
        "UPDATE consolidator.candidate_memory c SET state = $2, decided_by = $3, updated_at = now()"
        " FROM (SELECT id, state AS before FROM consolidator.candidate_memory "
        "WHERE id = ANY($1::text[]) FOR UPDATE) old WHERE c.id = old.id "
        "RETURNING c.id, c.scope_id, c.claim_domain, c.subject, old.before",
        list(ids),
        state,
        actor,
    )
    return [dict(r) for r in found]


async def scopes_of(conn: Conn, ids: Sequence[str]) -> set[str]:
    """The scopes of these pool entries."""
    found = await conn.fetch(
        "SELECT DISTINCT scope_id FROM consolidator.candidate_memory WHERE id = ANY($1::text[])",
        list(ids),
    )
    return {str(r["scope_id"]) for r in found}
