"""Export pages (keyset order per stream) and the raw restores import performs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tavern_ledger.audit import audit_dict
from tavern_ledger.domain.records import EvidenceRow, ObservationRow
from tavern_ledger.evidence import Conn
from tavern_ledger.evidence import observations as observation_store
from tavern_ledger.evidence import rows as evidence_store

Key = tuple[datetime, str]
"""Keyset position (created_at, id)."""


async def evidence_page(
    conn: Conn, scope_id: str | None, all_states: bool, after: Key | None, limit: int
) -> list[EvidenceRow]:
    found = await conn.fetch(
        f"SELECT {evidence_store.COLUMNS} FROM ledger.evidence "
        "WHERE ($1::text IS NULL OR scope_id = $1) AND ($2 OR state = 'active') "
        "AND ($3::timestamptz IS NULL OR (created_at, id) > ($3, $4)) "
        "ORDER BY created_at, id LIMIT $5",
        scope_id,
        all_states,
        after[0] if after else None,
        after[1] if after else "",
        limit,
    )
    return [evidence_store.row_of(r) for r in found]


async def observation_page(
    conn: Conn, scope_id: str | None, all_states: bool, after: Key | None, limit: int
) -> list[ObservationRow]:
    found = await conn.fetch(
        f"SELECT {observation_store.COLUMNS} FROM ledger.observation "
        "WHERE ($1::text IS NULL OR scope_id = $1) AND ($2 OR state = 'active') "
        "AND ($3::timestamptz IS NULL OR (created_at, id) > ($3, $4)) "
        "ORDER BY created_at, id LIMIT $5",
        scope_id,
        all_states,
        after[0] if after else None,
        after[1] if after else "",
        limit,
    )
    return [observation_store.row_of(r) for r in found]


async def candidate_page(
    conn: Conn, scope_id: str | None, after: Key | None, limit: int
) -> list[dict[str, Any]]:
    """Candidates with their event logs (replay order)."""
    found = await conn.fetch(
        "SELECT c.id, c.scope_id, c.domain, c.evidence_ids, c.policy, c.state, "
        "c.decision_reason, c.created_at, c.updated_at, "
        "coalesce((SELECT json_agg(json_build_object('candidateId', e.candidate_id, "
        "'ts', e.ts, 'event', e.event, 'reason', e.reason, "
        "'actor', e.actor, 'payload', e.payload) ORDER BY e.id) FROM ledger.candidate_events e "
        "WHERE e.candidate_id = c.id), '[]'::json) AS events FROM ledger.candidate c "
        "WHERE ($1::text IS NULL OR c.scope_id = $1) "
        "AND ($2::timestamptz IS NULL OR (c.created_at, c.id) > ($2, $3)) "
        "ORDER BY c.created_at, c.id LIMIT $4",
        scope_id,
        after[0] if after else None,
        after[1] if after else "",
        limit,
    )
    return [_candidate(r) for r in found]


def _candidate(r: Any) -> dict[str, Any]:
    policy = r["policy"]
    return {
        "id": r["id"],
        "scopeId": r["scope_id"],
        "domain": r["domain"],
        "evidenceIds": list(r["evidence_ids"] or ()),
        "policy": json.loads(policy) if isinstance(policy, str) else policy,
        "state": r["state"],
        "decisionReason": r["decision_reason"],
        "createdAt": r["created_at"].isoformat(),
        "updatedAt": r["updated_at"].isoformat(),
        "events": json.loads(r["events"]) if isinstance(r["events"], str) else r["events"],
    }


async def audit_page(
    conn: Conn, scope_id: str | None, after: int, limit: int
) -> list[dict[str, Any]]:
    found = await conn.fetch(
        "SELECT id, ts, op, target_id, scope_id, actor, reason, payload FROM ledger.audit "
        "WHERE ($1::text IS NULL OR scope_id = $1) AND id > $2 ORDER BY id LIMIT $3",
        scope_id,
        after,
        limit,
    )
    return [audit_dict(r) for r in found]


async def insert_candidate(
    conn: Conn, data: dict[str, Any], events: Sequence[dict[str, Any]]
) -> bool:
    """Restore a candidate and its events (nothing when the id exists)."""
    status = await conn.execute(
        "INSERT INTO ledger.candidate (id, scope_id, domain, evidence_ids, state, policy, "
        "decision_reason, created_at, updated_at) VALUES ($1, $2, $3, $4::text[], $5, $6::jsonb, "
        "$7, coalesce($8::timestamptz, now()), coalesce($9::timestamptz, now())) "
        "ON CONFLICT (id) DO NOTHING",
        data["id"],
        data["scopeId"],
        data["domain"],
        list(data.get("evidenceIds") or ()),
        data["state"],
        json.dumps(data.get("policy")) if data.get("policy") is not None else None,
        data.get("decisionReason"),
        _time(data.get("createdAt")),
        _time(data.get("updatedAt")),
    )
    if not status.endswith(" 1"):
        return False
    await conn.executemany(
        "INSERT INTO ledger.candidate_events (candidate_id, ts, event, reason, actor, payload) "
        "VALUES ($1, coalesce($2::timestamptz, now()), $3, $4, $5, $6::jsonb)",
        [
            (
                data["id"],
                _time(e.get("ts")),
                e["event"],
                e.get("reason") or "",
                e.get("actor") or "system",
                json.dumps(e.get("payload")) if e.get("payload") is not None else None,
            )
            for e in events
        ],
    )
    return True


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


async def insert_audit(conn: Conn, data: dict[str, Any]) -> bool:
    """Restore an audit entry under its own id (nothing when the id exists)."""
    status = await conn.execute(
        "INSERT INTO ledger.audit (id, ts, op, target_id, scope_id, actor, reason, payload) "
        "VALUES ($1, coalesce($2::timestamptz, now()), $3, $4, $5, $6, $7, $8::jsonb) "
        "ON CONFLICT (id) DO NOTHING",
        data["id"],
        _time(data.get("ts")),
        data["op"],
        data.get("targetId"),
        data["scopeId"],
        data["actor"],
        data.get("reason") or "",
        json.dumps(data.get("payload")) if data.get("payload") is not None else None,
    )
    return bool(status.endswith(" 1"))


async def sync_audit_sequence(conn: Conn) -> None:
    """After restoring explicit audit ids, new entries continue above the highest."""
    await conn.execute(
        "SELECT setval(pg_get_serial_sequence('ledger.audit', 'id'), "
        "greatest((SELECT max(id) FROM ledger.audit), 1))"
    )


async def relink_claims(conn: Conn, renamed: dict[str, str], imported: list[str]) -> None:
    """Claims this import stored cite their message by the id it was stored under (an export
    lists a message and its claims in any order, so this runs once every line is in)."""
    if renamed and imported:
        await conn.execute(
            "UPDATE ledger.evidence e SET metadata = jsonb_set(e.metadata, '{claim,of}', "
            "to_jsonb(m.new)) FROM unnest($1::text[], $2::text[]) AS m(old, new) "
            "WHERE e.claim_of = m.old AND e.id = ANY($3::text[])",
            list(renamed),
            list(renamed.values()),
            imported,
        )
