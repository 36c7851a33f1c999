"""Recall's reads: candidates from the lexical channel (each query term's newest postings, one
short index range per term), the session's and the scope's most recent evidence, ids another
channel found, and active rules, in one round trip; plus observations when enabled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tavern_ledger.domain.composer import Candidate
from tavern_ledger.store import Conn

# Limits are written into the text (they come from settings, never from a request) so that a
# generic plan of the prepared statement is as good as a custom one: with `LIMIT $n` and
# optional branches, Postgres' generic plan for this query was ~40x slower.

_ROWS = """
SELECT e.id, left(e.content, $5) AS content, e.content_hash, e.source_class,
       e.source_label, e.scope_id, e.authority, e.claim_domain, e.session_id, e.state,
       e.confidence, e.observed_at, e.valid_from, e.valid_until, e.tokens, e.source_event_id,
       NULL::text[] AS gates
FROM ids JOIN ledger.evidence e ON e.id = ids.evidence_id
WHERE e.scope_id = $1 AND e.state IN ('active', 'superseded')
"""


def now_sql(per_term: int, recent: int) -> str:
    """Candidates of the current view: $1 scope, $2 terms, $3 session, $4 extra ids,
    $5 content characters."""
    return f"""
WITH lex AS (
    SELECT p.evidence_id FROM unnest($2::text[]) AS t(term)
    CROSS JOIN LATERAL (
        SELECT et.evidence_id FROM ledger.evidence_term et
        WHERE et.scope_id = $1 AND et.term = t.term
        ORDER BY et.observed_at DESC LIMIT {int(per_term)}
    ) p
),
in_session AS (
    SELECT id AS evidence_id FROM ledger.evidence
    WHERE scope_id = $1 AND session_id = $3 AND state = 'active'
    ORDER BY observed_at DESC LIMIT {int(recent)}
),
in_scope AS (
    SELECT id AS evidence_id FROM ledger.evidence
    WHERE scope_id = $1 AND state = 'active'
    ORDER BY observed_at DESC LIMIT {int(recent)}
),
ids AS (
    SELECT evidence_id FROM lex UNION SELECT evidence_id FROM in_session
    UNION SELECT evidence_id FROM in_scope UNION SELECT unnest($4::text[])
)
{_ROWS}
UNION ALL
(SELECT r.id, r.text, '', 'rule', 'rule', r.scope_id, NULL, NULL, '', 'active', 0.95,
        r.updated_at, NULL, NULL, NULL, NULL, r.gates
 FROM ledger.rule r WHERE r.scope_id = $1 AND r.state = 'active'
 ORDER BY r.updated_at DESC LIMIT 50)
"""


def as_of_sql(per_term: int, recent: int) -> str:
    """Candidates of a past view: $1 scope, $2 terms, $3 instant, $4 extra ids,
    $5 content characters (superseded rows included; the read gate checks validity)."""
    return f"""
WITH lex AS (
    SELECT p.evidence_id FROM unnest($2::text[]) AS t(term)
    CROSS JOIN LATERAL (
        SELECT et.evidence_id FROM ledger.evidence_term et
        WHERE et.scope_id = $1 AND et.term = t.term AND et.observed_at <= $3
        ORDER BY et.observed_at DESC LIMIT {int(per_term)}
    ) p
),
recent AS (
    SELECT id AS evidence_id FROM ledger.evidence
    WHERE scope_id = $1 AND state IN ('active', 'superseded') AND observed_at <= $3
    ORDER BY observed_at DESC LIMIT {int(recent)}
),
ids AS (
    SELECT evidence_id FROM lex UNION SELECT evidence_id FROM recent
    UNION SELECT unnest($4::text[])
)
{_ROWS}
"""


@dataclass(frozen=True)
class CandidateQuery:
    scope_id: str
    session_id: str
    terms: Sequence[str]
    per_term: int
    recent: int
    as_of: datetime | None = None
    extra_ids: Sequence[str] = ()
    content_chars: int = 2000
    """How much of each text to read: more than any section lets one item render."""


async def candidates(conn: Conn, q: CandidateQuery) -> list[Candidate]:
    """Evidence candidates and (unless reading "as of") active rules, in one round trip."""
    moment: str | datetime
    if q.as_of is None:
        sql, moment = now_sql(q.per_term, q.recent), q.session_id
    else:
        sql, moment = as_of_sql(q.per_term, q.recent), q.as_of
    found = await conn.fetch(
        sql, q.scope_id, list(q.terms), moment, list(q.extra_ids), q.content_chars
    )
    return [_rule_candidate(r) if r["gates"] is not None else _evidence_candidate(r) for r in found]


def _evidence_candidate(r: Any) -> Candidate:
    return Candidate(
        id=r["id"],
        content=r["content"],
        content_hash=r["content_hash"],
        source_class=r["source_class"],
        label=r["source_label"] or _default_label(r["source_class"]),
        scope_id=r["scope_id"],
        authority=r["authority"],
        claim_domain=r["claim_domain"],
        session_id=r["session_id"],
        state=r["state"],
        confidence=r["confidence"],
        observed_at=r["observed_at"],
        valid_from=r["valid_from"],
        valid_until=r["valid_until"],
        tokens=r["tokens"] or None,
        source_event_id=r["source_event_id"],
    )


def _default_label(source_class: str) -> str:
    return {"user_input": "user", "user_correction": "user", "external_tool": "tool"}.get(
        source_class, source_class
    )


def _rule_candidate(r: Any) -> Candidate:
    """An active feedback-channel rule: a short `[rule]` line competing for the rules section."""
    return Candidate(
        id=r["id"],
        content=r["content"],
        source_class="rule",
        label="rule",
        scope_id=r["scope_id"],
        confidence=0.95,
        observed_at=r["observed_at"],
        section="rules",
        short_label=True,
        explicit_ref=True,
        pin_boost=0.5 if "always" in r["gates"] else 0.0,
    )


async def observations(
    conn: Conn, scope_id: str, authorities: Sequence[str], limit: int = 100
) -> list[Candidate]:
    """Active observations whose authority is on the injection whitelist (newest first)."""
    found = await conn.fetch(
        "SELECT id, subject, predicate, text, claim_domain, authority, evidence_ids, scope_id, "
        "observed_at, created_at FROM ledger.observation WHERE scope_id = $1 "
        "AND state = 'active' AND coalesce(authority, 'single_observation') = ANY($2::text[]) "
        "ORDER BY observed_at DESC, id LIMIT $3",
        scope_id,
        list(authorities),
        limit,
    )
    return [
        Candidate(
            id=r["id"],
            content=f"{r['subject']} {r['predicate']}: {r['text']}",
            source_class="observation",
            label="observation",
            scope_id=r["scope_id"],
            authority=r["authority"] or "single_observation",
            claim_domain=r["claim_domain"],
            confidence=0.6,
            observed_at=r["created_at"] or r["observed_at"],
            evidence_ids=tuple(r["evidence_ids"] or ()),
        )
        for r in found
    ]
