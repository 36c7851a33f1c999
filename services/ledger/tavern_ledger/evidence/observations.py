"""Observations: insert with same-key supersede (one active row per key), reads and lineage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from tavern_ledger.domain.records import ObservationRow
from tavern_ledger.evidence import Conn

COLUMNS = (
    "id, scope_id, subject, predicate, claim_domain, authority, text, evidence_ids, supersedes, "
    "state, flags, observed_at, created_at"
)


@dataclass(frozen=True)
class Upserted:
    row: ObservationRow
    inserted: bool
    superseded_id: str | None = None


def row_of(record: Any) -> ObservationRow:
    data = dict(record)
    for key in ("evidence_ids", "supersedes", "flags"):
        data[key] = tuple(data[key] or ())
    return ObservationRow(**data)


async def get(conn: Conn, observation_id: str) -> ObservationRow | None:
    found = await conn.fetchrow(
        f"SELECT {COLUMNS} FROM ledger.observation WHERE id = $1", observation_id
    )
    return row_of(found) if found else None


async def active(conn: Conn, scope_id: str, limit: int) -> list[ObservationRow]:
    """The scope's active observations, newest first."""
    found = await conn.fetch(
        f"SELECT {COLUMNS} FROM ledger.observation WHERE scope_id = $1 AND state = 'active' "
        "ORDER BY observed_at DESC, id LIMIT $2",
        scope_id,
        limit,
    )
    return [row_of(r) for r in found]


async def evidence_authorities(conn: Conn, ids: Sequence[str]) -> dict[str, str]:
    found = await conn.fetch(
        "SELECT id, authority FROM ledger.evidence WHERE id = ANY($1::text[])", list(ids)
    )
    return {r["id"]: r["authority"] for r in found}


async def upsert(conn: Conn, row: ObservationRow) -> Upserted:
    """Insert `row`; an existing id changes nothing; an active row with the same key
    (scope, subject, predicate, domain) is superseded by an active `row`. Call in a transaction."""
    existing = await get(conn, row.id)
    if existing is not None:
        return Upserted(existing, inserted=False)
    old = None
    if row.state == "active":
        old = await conn.fetchval(
            "UPDATE ledger.observation SET state = 'superseded' WHERE scope_id = $1 "
            "AND subject = $2 AND predicate = $3 AND claim_domain = $4 AND state = 'active' "
            "RETURNING id",
            row.scope_id,
            row.subject,
            row.predicate,
            row.claim_domain,
        )
    if old is not None:
        row = replace(row, supersedes=(str(old),))
    await insert(conn, [row])
    return Upserted(row, inserted=True, superseded_id=str(old) if old else None)


async def locked(conn: Conn, observation_id: str) -> ObservationRow | None:
    found = await conn.fetchrow(
        f"SELECT {COLUMNS} FROM ledger.observation WHERE id = $1 FOR UPDATE", observation_id
    )
    return row_of(found) if found else None


async def listing(conn: Conn, scope_id: str, state: str | None, limit: int) -> list[ObservationRow]:
    """A scope's observations in `state` (None: any), newest first."""
    found = await conn.fetch(
        f"SELECT {COLUMNS} FROM ledger.observation WHERE scope_id = $1 "
        "AND ($2::text IS NULL OR state = $2) ORDER BY observed_at DESC, id LIMIT $3",
        scope_id,
        state,
        limit,
    )
    return [row_of(r) for r in found]


async def activate(conn: Conn, row: ObservationRow) -> Upserted:
    """A held (quarantined) row becomes active and supersedes the active row of its key, as
    an upsert would have. Call in a transaction, with `row` locked."""
    old = await conn.fetchval(
        "UPDATE ledger.observation SET state = 'superseded' WHERE scope_id = $1 "
        "AND subject = $2 AND predicate = $3 AND claim_domain = $4 AND state = 'active' "
        "AND id <> $5 RETURNING id",
        row.scope_id,
        row.subject,
        row.predicate,
        row.claim_domain,
        row.id,
    )
    supersedes = (str(old),) if old is not None else row.supersedes
    await conn.execute(
        "UPDATE ledger.observation SET state = 'active', supersedes = $2 WHERE id = $1",
        row.id,
        list(supersedes),
    )
    active = replace(row, state="active", supersedes=supersedes)
    return Upserted(active, inserted=True, superseded_id=str(old) if old else None)


async def insert(conn: Conn, rows: Sequence[ObservationRow]) -> int:
    """Raw insert (import): rows whose id exists are skipped; returns how many were written."""
    count = 0
    for row in rows:
        status = await conn.execute(
            f"INSERT INTO ledger.observation ({COLUMNS}) VALUES "
            "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, coalesce($13, now())) "
            "ON CONFLICT (id) DO NOTHING",
            row.id,
            row.scope_id,
            row.subject,
            row.predicate,
            row.claim_domain,
            row.authority,
            row.text,
            list(row.evidence_ids),
            list(row.supersedes),
            row.state,
            list(row.flags),
            row.observed_at,
            row.created_at,
        )
        count += status.endswith(" 1")
    return count
