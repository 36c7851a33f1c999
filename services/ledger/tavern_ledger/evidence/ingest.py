"""Ingestion's writes: one part of a batch (evidence, postings, audits, facts) in one statement,
what ingestion learned about sessions, and the consumer's checkpoint."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tavern_ledger.audit import payload_json
from tavern_ledger.domain.extract import SessionFacts
from tavern_ledger.domain.facts import OutboxRecord
from tavern_ledger.domain.records import AuditEntry, EvidenceRow
from tavern_ledger.domain.text import terms
from tavern_ledger.evidence import Conn
from tavern_ledger.evidence import rows as evidence
from tavern_ledger.scopes import owners

# Each CTE after `inserted` keeps only what belongs to a row this statement inserted, so a
# redelivered event writes no second posting, append audit or fact. Refusal audits have no
# evidence id; their dedupe key keeps them to one.
_APPEND_PART = f"""
WITH inserted AS ({evidence.INSERT}),
postings AS (
    INSERT INTO ledger.evidence_term (scope_id, term, observed_at, evidence_id)
    SELECT p.scope_id, t.term, p.observed_at, p.id
    FROM unnest($28::text[], $29::text[], $30::timestamptz[], $31::text[])
         AS p(id, scope_id, observed_at, terms)
         CROSS JOIN LATERAL string_to_table(p.terms, ' ') AS t(term)
    WHERE p.id IN (SELECT id FROM inserted)
),
audits AS (
    INSERT INTO ledger.audit (ts, op, target_id, scope_id, actor, reason, payload, dedupe_key)
    SELECT coalesce(a.ts, now()), a.op, a.target_id, a.scope_id, a.actor, a.reason,
           a.payload::jsonb, a.dedupe_key
    FROM unnest($32::text[], $33::timestamptz[], $34::text[], $35::text[], $36::text[],
                $37::text[], $38::text[], $39::text[], $40::text[])
         AS a(evidence_id, ts, op, target_id, scope_id, actor, reason, payload, dedupe_key)
    WHERE a.evidence_id IS NULL OR a.evidence_id IN (SELECT id FROM inserted)
    ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
),
facts AS (
    INSERT INTO ledger.outbox (msg_id, subject, body)
    SELECT f.msg_id, f.subject, f.body
    FROM unnest($41::text[], $42::text[], $43::text[], $44::bytea[]) WITH ORDINALITY
         AS f(evidence_id, msg_id, subject, body, position)
    WHERE f.evidence_id IN (SELECT id FROM inserted)
    ORDER BY f.position  -- outbox ids follow the stream: the relay publishes in id order
)
SELECT id FROM inserted
"""


@dataclass(frozen=True)
class Admission:
    """An admitted evidence row with what is written only if the row is new."""

    row: EvidenceRow
    audit: AuditEntry
    fact: OutboxRecord


@dataclass(frozen=True)
class PreparedPart:
    """One part of a batch as the parameters of its statement."""

    rows: Sequence[EvidenceRow]
    audits: int
    args: list[Any]


def prepare_part(admitted: Sequence[Admission], refusals: Sequence[AuditEntry]) -> PreparedPart:
    """The statement of one part: built while the previous part is still being written."""
    rows = [a.row for a in admitted]
    indexed = [r for r in rows if evidence.indexed(r)]
    audits = [(a.row.id, a.audit) for a in admitted] + [(None, e) for e in refusals]
    postings = [
        [r.id for r in indexed],
        [r.scope_id for r in indexed],
        [r.observed_at for r in indexed],
        [_terms_text(r.content) for r in indexed],
    ]
    facts = [
        [a.row.id for a in admitted],
        [a.fact.msg_id for a in admitted],
        [a.fact.subject for a in admitted],
        [a.fact.body for a in admitted],
    ]
    args = [*evidence.columns(rows), *postings, *_audit_columns(audits), *facts]
    return PreparedPart(rows, len(audits), args)


def _terms_text(content: str) -> str:
    """The row's index terms, space-separated for `string_to_table` (terms are single words)."""
    found = terms(content)
    text = " ".join(found)
    if found and text.count(" ") != len(found) - 1:
        raise ValueError(f"an index term holds a space: {found!r}")
    return text


def _audit_columns(entries: Sequence[tuple[str | None, AuditEntry]]) -> list[list[Any]]:
    return [
        [evidence_id for evidence_id, _ in entries],
        [e.ts for _, e in entries],
        [e.op for _, e in entries],
        [e.target_id for _, e in entries],
        [e.scope_id for _, e in entries],
        [e.actor for _, e in entries],
        [e.reason for _, e in entries],
        [payload_json(e.payload) for _, e in entries],
        [e.dedupe_key for _, e in entries],
    ]


async def write_part(conn: Conn, part: PreparedPart) -> list[EvidenceRow]:
    """Write one part; returns its rows that were new (the others were stored before)."""
    if not part.rows and not part.audits:
        return []
    found = await conn.fetch(_APPEND_PART, *part.args)
    fresh = {r["id"] for r in found}
    return [r for r in part.rows if r.id in fresh]


async def sessions(conn: Conn, session_ids: Iterable[str]) -> dict[str, SessionFacts]:
    found = await conn.fetch(
        "SELECT session_id, chat_id, session_type, parent_session_id, scope_id, owner "
        "FROM ledger.ingest_session WHERE session_id = ANY($1::text[])",
        list(set(session_ids)),
    )
    return {
        r["session_id"]: SessionFacts(
            r["session_id"],
            r["chat_id"],
            r["session_type"],
            r["parent_session_id"],
            r["scope_id"] or "",
            r["owner"],
        )
        for r in found
    }


async def save_sessions(conn: Conn, facts: Sequence[SessionFacts]) -> None:
    """Record what ingestion learned of sessions (their scopes are claimed by `claim_scopes`,
    once per batch); rows in key order, as every batch writes them."""
    if not facts:
        return
    facts = sorted(facts, key=lambda f: f.session_id)
    await conn.execute(
        "INSERT INTO ledger.ingest_session "
        "(session_id, chat_id, session_type, parent_session_id, scope_id, owner)"
        " SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],"
        " $6::text[]) "
        "ON CONFLICT (session_id) DO UPDATE SET chat_id = excluded.chat_id, "
        "session_type = excluded.session_type, parent_session_id = excluded.parent_session_id, "
        "scope_id = excluded.scope_id, owner = excluded.owner, updated_at = now()",
        [f.session_id for f in facts],
        [f.chat_id for f in facts],
        [f.session_type for f in facts],
        [f.parent_session_id for f in facts],
        [f.scope for f in facts],
        [f.owner for f in facts],
    )


async def claim_scopes(conn: Conn, facts: Sequence[SessionFacts]) -> None:
    """The scopes the sessions' evidence lands in belong to each session's owner (the first
    session naming a scope claims it): one statement a batch, in key order, as the bindings
    consumer claims them, so the two never deadlock."""
    await owners.claim_all(conn, [(f.owner, (f.chat_id, f.session_id, f.scope)) for f in facts])


async def advance_checkpoint(conn: Conn, consumer: str, stream_seq: int) -> None:
    """Move the consumer's checkpoint forward (never back: redeliveries arrive late)."""
    await conn.execute(
        "INSERT INTO ledger.ingest_checkpoint (consumer, stream_seq) VALUES ($1, $2) "
        "ON CONFLICT (consumer) DO UPDATE SET stream_seq = "
        "greatest(ledger.ingest_checkpoint.stream_seq, excluded.stream_seq), updated_at = now()",
        consumer,
        stream_seq,
    )


async def checkpoint(conn: Conn, consumer: str) -> int:
    found = await conn.fetchval(
        "SELECT stream_seq FROM ledger.ingest_checkpoint WHERE consumer = $1", consumer
    )
    return int(found or 0)
