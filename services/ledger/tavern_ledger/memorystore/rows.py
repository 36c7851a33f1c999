"""asyncpg queries of `ledger.memory`; rows come back as `MemoryRecord`s."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tavern_ledger.domain.memory import MemoryRecord
from tavern_ledger.domain.scopes import ScopeKey
from tavern_ledger.scopes.bindings import Conn

_COLUMNS = (
    "id, scope, scope_id, kind, content, tags, importance, confidence, claim_domain, source, "
    "state, gate_reasons, revision, created_at, updated_at, expires_at, forgotten_at"
)
_INSERT = f"""
INSERT INTO ledger.memory ({_COLUMNS})
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, $12, $13, $14, $15, $16, $17)
"""
_UPDATE = """
UPDATE ledger.memory SET content = $2, tags = $3, importance = $4, confidence = $5,
  claim_domain = $6, source = $7::jsonb, state = $8, gate_reasons = $9, revision = $10,
  updated_at = $11, expires_at = $12, forgotten_at = $13
WHERE id = $1 AND revision = $10 - 1
"""
_SEARCH = f"""
SELECT {_COLUMNS} FROM ledger.memory m
JOIN unnest($1::text[], $2::text[]) AS k(k_scope, k_scope_id)
  ON m.scope = k.k_scope AND m.scope_id = k.k_scope_id
WHERE m.state = 'active' AND (m.expires_at IS NULL OR m.expires_at > $3)
  AND ($4::text[] IS NULL OR m.tags @> $4)
  AND ($5::timestamptz IS NULL OR m.created_at >= $5)
  AND ($6::timestamptz IS NULL OR m.created_at < $6)
  AND ($7::text[] IS NULL
       OR lower(m.content || ' ' || array_to_string(m.tags, ' ')) LIKE ANY ($7))
ORDER BY m.updated_at DESC
LIMIT $8
"""


@dataclass(frozen=True)
class SearchFilter:
    keys: Sequence[ScopeKey]
    now: datetime
    tags: Sequence[str] = ()
    since: datetime | None = None
    until: datetime | None = None
    patterns: Sequence[str] = ()
    cap: int = 500


def _params(r: MemoryRecord) -> tuple[Any, ...]:
    return (
        r.id,
        r.scope,
        r.scope_id,
        r.kind,
        r.content,
        list(r.tags),
        r.importance,
        r.confidence,
        r.claim_domain,
        json.dumps(r.source),
        r.state,
        list(r.gate_reasons),
        r.revision,
        r.created_at,
        r.updated_at,
        r.expires_at,
        r.forgotten_at,
    )


def _record(row: Any) -> MemoryRecord:
    data = dict(row)
    data["tags"] = tuple(data["tags"])
    data["gate_reasons"] = tuple(data["gate_reasons"])
    data["source"] = json.loads(data["source"])
    return MemoryRecord(**data)


async def insert(conn: Conn, record: MemoryRecord) -> None:
    await conn.execute(_INSERT, *_params(record))


async def replace(conn: Conn, record: MemoryRecord) -> bool:
    """Store `record` over its previous revision; False if that revision is no longer there."""
    r = record
    status = await conn.execute(
        _UPDATE,
        r.id,
        r.content,
        list(r.tags),
        r.importance,
        r.confidence,
        r.claim_domain,
        json.dumps(r.source),
        r.state,
        list(r.gate_reasons),
        r.revision,
        r.updated_at,
        r.expires_at,
        r.forgotten_at,
    )
    return bool(status == "UPDATE 1")


async def load(conn: Conn, memory_id: str, *, lock: bool = False) -> MemoryRecord | None:
    suffix = " FOR UPDATE" if lock else ""
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM ledger.memory WHERE id = $1{suffix}", memory_id
    )
    return _record(row) if row is not None else None


async def candidates(conn: Conn, f: SearchFilter) -> list[MemoryRecord]:
    """Active, unexpired records of the scopes that match the filter, newest first."""
    rows = await conn.fetch(
        _SEARCH,
        [k.scope for k in f.keys],
        [k.scope_id for k in f.keys],
        f.now,
        list(f.tags) or None,
        f.since,
        f.until,
        list(f.patterns) or None,
        f.cap,
    )
    return [_record(r) for r in rows]
