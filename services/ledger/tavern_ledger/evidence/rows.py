"""Evidence rows and their lexical postings: batch inserts (ON CONFLICT on the derived id),
reads, and the only updates evidence allows (state, supersedes, validity, metadata, redaction).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tavern_ledger.domain.lifecycle import upcast_review_status
from tavern_ledger.domain.records import EvidenceRow
from tavern_ledger.domain.segments import FACTUAL
from tavern_ledger.domain.text import terms
from tavern_ledger.evidence import Conn

COLUMNS = (
    "id, scope_id, session_id, agent_key, session_type, source_class, authority, confidence, "
    "durability, sensitivity, claim_domain, content, content_hash, source_ref, source_event_id, "
    "source_label, ingest, flags, tokens, observed_at, valid_from, valid_until, state, "
    "supersedes, metadata, created_at, updated_at"
)

INSERT = f"""
INSERT INTO ledger.evidence ({COLUMNS})
SELECT u.id, u.scope_id, u.session_id, u.agent_key, u.session_type, u.source_class, u.authority,
       u.confidence, u.durability, u.sensitivity, u.claim_domain, u.content, u.content_hash,
       u.source_ref, u.source_event_id, u.source_label, u.ingest,
       coalesce(string_to_array(u.flags, ','), '{{}}'), u.tokens, u.observed_at, u.valid_from,
       u.valid_until,
       u.state, coalesce(string_to_array(u.supersedes, ','), '{{}}'), u.metadata::jsonb,
       coalesce(u.created_at, now()), coalesce(u.updated_at, now())
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
            $8::float8[], $9::float8[], $10::text[], $11::text[], $12::text[], $13::text[],
            $14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::int[],
            $20::timestamptz[], $21::timestamptz[], $22::timestamptz[], $23::text[], $24::text[],
            $25::text[], $26::timestamptz[], $27::timestamptz[])
     AS u(id, scope_id, session_id, agent_key, session_type, source_class, authority, confidence,
          durability, sensitivity, claim_domain, content, content_hash, source_ref,
          source_event_id, source_label, ingest, flags, tokens, observed_at, valid_from,
          valid_until, state, supersedes, metadata, created_at, updated_at)
ON CONFLICT (id) DO NOTHING
RETURNING id
"""
"""Insert the rows of `columns(rows)` ($1 to $27) unless their id exists; returns the new ids."""

INDEXED_STATES = frozenset({"active", "superseded"})
"""States whose rows recall may read, so the lexical index holds their postings."""
RECALLABLE = "coalesce(claim_kind, '') NOT IN ('message', 'question', 'chatter')"
"""The rows recall may read as memory (`EvidenceRow.recallable`), as SQL over `ledger.evidence`:
not a person's whole message (its claims are read), nor a question or small talk."""


INDEXED_KINDS = "coalesce(claim_kind, '') NOT IN ('message', 'chatter')"
"""The rows whose postings the lexical index holds (`EvidenceRow.indexed_kind`) in a readable
state: questions too, so that the answer next to one is found."""


def indexed(row: EvidenceRow) -> bool:
    """The lexical index holds the row's postings: recall may read it in its state."""
    return row.state in INDEXED_STATES and row.indexed_kind


def columns(rows: Sequence[EvidenceRow]) -> list[list[Any]]:
    """The parameters of `INSERT`: one array per column."""
    return [
        [r.id for r in rows],
        [r.scope_id for r in rows],
        [r.session_id for r in rows],
        [r.agent_key for r in rows],
        [r.session_type for r in rows],
        [r.source_class for r in rows],
        [r.authority for r in rows],
        [r.confidence for r in rows],
        [r.durability for r in rows],
        [r.sensitivity for r in rows],
        [r.claim_domain for r in rows],
        [r.content for r in rows],
        [r.content_hash for r in rows],
        [r.source_ref for r in rows],
        [r.source_event_id for r in rows],
        [r.source_label for r in rows],
        [r.ingest for r in rows],
        [",".join(r.flags) if r.flags else None for r in rows],
        [r.tokens for r in rows],
        [r.observed_at for r in rows],
        [r.valid_from for r in rows],
        [r.valid_until for r in rows],
        [r.state for r in rows],
        [",".join(r.supersedes) if r.supersedes else None for r in rows],
        [json.dumps(r.metadata, ensure_ascii=False) for r in rows],
        [r.created_at for r in rows],
        [r.updated_at for r in rows],
    ]


async def insert(conn: Conn, rows: Sequence[EvidenceRow]) -> list[EvidenceRow]:
    """Insert `rows` (one statement); those that already existed are skipped. Returns the rows
    that were inserted, with their postings written when recall may read them."""
    if not rows:
        return []
    found = await conn.fetch(INSERT, *columns(rows))
    fresh = {r["id"] for r in found}
    inserted = [r for r in rows if r.id in fresh]
    await add_postings(conn, [r for r in inserted if indexed(r)])
    return inserted


async def add_postings(conn: Conn, rows: Sequence[EvidenceRow]) -> None:
    """Index `rows` for the lexical channel. COPY, no conflict handling: only the transaction
    that inserted (or re-indexed) a row writes its postings, and its terms are distinct."""
    records = [
        (row.scope_id, term, row.observed_at, row.id) for row in rows for term in terms(row.content)
    ]
    if records:
        await conn.copy_records_to_table(
            "evidence_term",
            schema_name="ledger",
            records=records,
            columns=("scope_id", "term", "observed_at", "evidence_id"),
        )


async def remove_postings(conn: Conn, row: EvidenceRow) -> None:
    await conn.execute(
        "DELETE FROM ledger.evidence_term WHERE scope_id = $1 AND term = ANY($2::text[]) "
        "AND evidence_id = $3",
        row.scope_id,
        terms(row.content),
        row.id,
    )


def row_of(record: Any) -> EvidenceRow:
    """An `EvidenceRow` from a fetched record holding every column."""
    data = dict(record)
    data["flags"] = tuple(data["flags"] or ())
    data["supersedes"] = tuple(data["supersedes"] or ())
    metadata = data["metadata"]
    loaded = json.loads(metadata) if isinstance(metadata, str) else dict(metadata)
    data["metadata"] = upcast_review_status(loaded)
    return EvidenceRow(**data)


async def get(conn: Conn, evidence_id: str, *, for_update: bool = False) -> EvidenceRow | None:
    lock = " FOR UPDATE" if for_update else ""
    found = await conn.fetchrow(
        f"SELECT {COLUMNS} FROM ledger.evidence WHERE id = $1{lock}", evidence_id
    )
    return row_of(found) if found else None


async def get_many(conn: Conn, ids: Sequence[str]) -> list[EvidenceRow]:
    found = await conn.fetch(
        f"SELECT {COLUMNS} FROM ledger.evidence WHERE id = ANY($1::text[])", list(ids)
    )
    return [row_of(r) for r in found]


async def by_content_hash(
    conn: Conn, digest: str, scope_id: str, claim: bool = False
) -> str | None:
    """The row of `scope_id` with this content hash (the same text may live in other scopes),
    among claims cut from messages or among the rest (a message of one claim holds its text)."""
    found = await conn.fetchval(
        "SELECT id FROM ledger.evidence WHERE content_hash = $1 AND scope_id = $2 "
        "AND (claim_of IS NOT NULL) = $3 LIMIT 1",
        digest,
        scope_id,
        claim,
    )
    return str(found) if found is not None else None


async def save_change(conn: Conn, row: EvidenceRow) -> None:
    """Write the mutable fields of `row` (state, supersedes, validity, metadata, and the
    content only when it was redacted)."""
    await conn.execute(
        "UPDATE ledger.evidence SET state = $2, supersedes = $3::text[], valid_from = $4, "
        "valid_until = $5, metadata = $6::jsonb, content = $7, tokens = $8, flags = $9::text[], "
        "updated_at = $10 WHERE id = $1",
        row.id,
        row.state,
        list(row.supersedes),
        row.valid_from,
        row.valid_until,
        json.dumps(row.metadata, ensure_ascii=False),
        row.content,
        row.tokens,
        list(row.flags),
        row.updated_at,
    )


STATEMENT_PROBES = 400
"""Postings read per correction: the newest holding any of its terms (or its classes' words)."""
RECENT_STATEMENTS = 60
FACTUAL_SQL = ", ".join(f"'{kind}'" for kind in sorted(FACTUAL))


async def statements_before(
    conn: Conn, row: EvidenceRow, probe_terms: Sequence[str]
) -> list[EvidenceRow]:
    """Active claims of fact of people in `row`'s scope from before it that a correction may
    end (never another claim of its own message): those holding one of `probe_terms`, and the
    scope's most recent ones."""
    found = await conn.fetch(
        f"""
        WITH probed AS (
            SELECT evidence_id AS id FROM ledger.evidence_term
            WHERE scope_id = $1 AND term = ANY($4::text[]) AND observed_at <= $3
            ORDER BY observed_at DESC LIMIT {STATEMENT_PROBES}
        ), recent AS (
            SELECT id FROM ledger.evidence
            WHERE scope_id = $1 AND state = 'active' AND observed_at <= $3
              AND {RECALLABLE} AND claim_kind IN ({FACTUAL_SQL})
            ORDER BY observed_at DESC LIMIT {RECENT_STATEMENTS}
        )
        SELECT {COLUMNS} FROM ledger.evidence
        WHERE id IN (SELECT id FROM probed UNION SELECT id FROM recent)
          AND scope_id = $1 AND state = 'active' AND id <> $2 AND observed_at <= $3
          AND claim_kind IN ({FACTUAL_SQL}) AND claim_of IS DISTINCT FROM $5
        ORDER BY observed_at, id
        """,
        row.scope_id,
        row.id,
        row.observed_at,
        list(probe_terms),
        row.claim_of,
    )
    return [row_of(r) for r in found]


async def claims_of(conn: Conn, message_id: str) -> list[EvidenceRow]:
    """The claims cut from a message, in order, locked for a change."""
    found = await conn.fetch(
        f"SELECT {COLUMNS} FROM ledger.evidence WHERE claim_of = $1 "
        "ORDER BY (metadata -> 'claim' ->> 'n')::int FOR UPDATE",
        message_id,
    )
    return [row_of(r) for r in found]


async def superseding(conn: Conn, evidence_id: str) -> list[EvidenceRow]:
    """Rows whose `supersedes` names `evidence_id` (its replacements)."""
    found = await conn.fetch(
        f"SELECT {COLUMNS} FROM ledger.evidence WHERE $1 = ANY(supersedes)", evidence_id
    )
    return [row_of(r) for r in found]


@dataclass(frozen=True)
class EvidenceFilter:
    """What `query` matches (all given conditions); `states` empty means any state."""

    scope_id: str | None = None
    session_id: str | None = None
    states: tuple[str, ...] = ("active",)
    claim_domain: str | None = None
    authority: str | None = None
    source_class: str | None = None
    contains: str | None = None
    as_of: datetime | None = None
    limit: int = 50


def like_pattern(text: str) -> str:
    """`text` as a LIKE substring pattern, with `\\`, `%` and `_` escaped."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def query(conn: Conn, f: EvidenceFilter) -> list[EvidenceRow]:
    """Newest first (by observation time)."""
    found = await conn.fetch(
        f"SELECT {COLUMNS} FROM ledger.evidence WHERE ($1::text IS NULL OR scope_id = $1) "
        "AND ($2::text IS NULL OR session_id = $2) "
        "AND (cardinality($3::text[]) = 0 OR state = ANY($3::text[])) "
        "AND ($4::text IS NULL OR claim_domain = $4) AND ($5::text IS NULL OR authority = $5) "
        "AND ($6::text IS NULL OR source_class = $6) "
        "AND ($7::text IS NULL OR content ILIKE $7 ESCAPE '\\') "
        "AND ($8::timestamptz IS NULL OR (coalesce(valid_from, observed_at) <= $8 "
        "AND (valid_until IS NULL OR valid_until > $8))) "
        "ORDER BY observed_at DESC, id LIMIT $9",
        f.scope_id,
        f.session_id,
        list(f.states),
        f.claim_domain,
        f.authority,
        f.source_class,
        like_pattern(f.contains) if f.contains else None,
        f.as_of,
        f.limit,
    )
    return [row_of(r) for r in found]


async def stats(conn: Conn, scope_id: str | None) -> dict[str, Any]:
    found = await conn.fetch(
        "SELECT state, source_class, count(*) AS n FROM ledger.evidence "
        "WHERE ($1::text IS NULL OR scope_id = $1) GROUP BY state, source_class",
        scope_id,
    )
    by_state: dict[str, int] = dict.fromkeys(("active", "quarantined", "superseded", "redacted"), 0)
    by_class: dict[str, int] = {}
    for r in found:
        by_state[r["state"]] = by_state.get(r["state"], 0) + r["n"]
        by_class[r["source_class"]] = by_class.get(r["source_class"], 0) + r["n"]
    return {"total": sum(by_state.values()), **by_state, "by_source_class": by_class}


async def related(conn: Conn, evidence_id: str, hops: int = 50) -> dict[str, EvidenceRow]:
    """The rows linked to `evidence_id` through `supersedes`, both ways (bounded walk)."""
    found: dict[str, EvidenceRow] = {}
    asked: set[str] = set()
    frontier = {evidence_id}
    for _ in range(hops):
        if not frontier:
            break
        asked |= frontier
        rows = await conn.fetch(
            f"SELECT {COLUMNS} FROM ledger.evidence WHERE id = ANY($1::text[]) "
            "OR supersedes && $1::text[]",
            list(frontier),
        )
        fresh = {r["id"]: row_of(r) for r in rows if r["id"] not in found}
        found.update(fresh)
        linked = {p for row in fresh.values() for p in row.supersedes} | set(fresh)
        frontier = linked - asked
    return found
