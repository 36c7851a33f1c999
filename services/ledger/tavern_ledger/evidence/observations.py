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


Key = tuple[str, str, str, str]


def key_of(row: ObservationRow) -> Key:
    """What one active row per key means: scope, subject, predicate, claim domain."""
    return row.scope_id, row.subject, row.predicate, row.claim_domain


async def upsert(conn: Conn, rows: Sequence[ObservationRow]) -> list[Upserted]:
    """Each row, in order, as if inserted alone: an existing id (stored before, or earlier in
    `rows`) changes nothing; an active row supersedes the active row of its key. Call in a
    transaction. Four statements whatever the number of rows: the known ids, the active rows
    of the keys (locked), the superseded ones marked, the new rows inserted."""
    if not rows:
        return []
    found = await conn.fetch(
        f"SELECT {COLUMNS} FROM ledger.observation WHERE id = ANY($1::text[])",
        list(dict.fromkeys(r.id for r in rows)),
    )
    stored = {r["id"]: row_of(r) for r in found}
    active = await _active_ids(conn, [key_of(r) for r in rows if r.state == "active"])
    done: list[Upserted] = []
    new: list[str] = []
    superseded: list[str] = []
    for row in rows:
        existing = stored.get(row.id)
        if existing is not None:
            done.append(Upserted(existing, inserted=False))
            continue
        old = active.get(key_of(row)) if row.state == "active" else None
        if row.state == "active":
            active[key_of(row)] = row.id
        if old is not None:
            row = replace(row, supersedes=(old,))
            if old in new:  # inserted earlier in `rows`: it is inserted superseded
                stored[old] = replace(stored[old], state="superseded")
            else:
                superseded.append(old)
        stored[row.id] = row
        new.append(row.id)
        done.append(Upserted(row, inserted=True, superseded_id=old))
    if superseded:
        await conn.execute(
            "UPDATE ledger.observation SET state = 'superseded' "
            "WHERE id = ANY($1::text[]) AND state = 'active'",
            superseded,
        )
    await conn.executemany(_INSERT, [_values(stored[i]) for i in new])
    return done


async def _active_ids(conn: Conn, keys: Sequence[Key]) -> dict[Key, str]:
    """The active row of each key, locked until the transaction ends."""
    if not keys:
        return {}
    unique = list(dict.fromkeys(keys))
    found = await conn.fetch(
        "SELECT o.id, o.scope_id, o.subject, o.predicate, o.claim_domain "
        "FROM ledger.observation o JOIN unnest($1::text[], $2::text[], $3::text[], $4::text[]) "
        "AS k(scope_id, subject, predicate, claim_domain) USING "
        "(scope_id, subject, predicate, claim_domain) WHERE o.state = 'active' FOR UPDATE OF o",
        *(list(column) for column in zip(*unique, strict=True)),
    )
    return {(r[1], r[2], r[3], r[4]): r[0] for r in found}


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


_INSERT = (
    f"INSERT INTO ledger.observation ({COLUMNS}) VALUES "
    "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, coalesce($13, now())) "
    "ON CONFLICT (id) DO NOTHING"
)


def _values(row: ObservationRow) -> tuple[Any, ...]:
    return (
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


async def insert(conn: Conn, rows: Sequence[ObservationRow]) -> int:
    """Raw insert (import): rows whose id exists are skipped; returns how many were written."""
    count = 0
    for row in rows:
        status = await conn.execute(_INSERT, *_values(row))
        count += status.endswith(" 1")
    return count
