"""Recall's reads: candidates from the lexical channel (the rows whose query terms weigh most,
from each term's newest postings, one short index range per term) with the evidence around the
best of them, the session's and the scope's most recent evidence, ids another channel found, and
active rules, in one round trip; the scope's term statistics (counted only when not known); plus
observations when enabled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tavern_ledger.domain.composer import Candidate
from tavern_ledger.domain.ranking import CorpusStats
from tavern_ledger.evidence import Conn

# Every join to `ledger.evidence` is a LATERAL primary-key lookup with LIMIT 1 (which the planner
# cannot flatten): with fresh or skewed statistics it otherwise scans the whole scope per id.
# Limits are written into the text (they come from settings, never from a request) and counting
# is left to functions called only for statistics the service does not know yet, so that a
# generic plan of the prepared statement is as good as a custom one and Postgres stops planning
# it on every call (with a counting subquery in the text every recall paid ~1 ms of planning).

DF_CAP = 5000
"""Document frequencies are counted up to this (a term that common weighs next to nothing)."""


def _statistics() -> str:
    """$1 scope, $2 terms, $6 their known frequencies (NULL: count), $7 the known number of
    rows in scope (NULL: count)."""
    return f"""
q AS MATERIALIZED (
    SELECT t.term, t.ord,
           coalesce(t.known, ledger.term_frequency($1, t.term, {DF_CAP})) AS df
    FROM unnest($2::text[], $6::int[]) WITH ORDINALITY AS t(term, known, ord)
),
n AS MATERIALIZED (
    SELECT greatest(1, coalesce($7::int, ledger.scope_documents($1))) AS docs
),
"""


def _lexical(per_term: int, lexical: int, moment: str) -> str:
    """The best `lexical` rows by the idf of the query terms they hold, among each term's
    newest `per_term` postings."""
    return f"""
lex AS MATERIALIZED (
    SELECT p.evidence_id,
           sum(ln(1.0 + (greatest(n.docs, q.df) - q.df + 0.5)::float8 / (q.df + 0.5))) AS w
    FROM q CROSS JOIN n CROSS JOIN LATERAL (
        SELECT et.evidence_id FROM ledger.evidence_term et
        WHERE et.scope_id = $1 AND et.term = q.term{moment}
        ORDER BY et.observed_at DESC LIMIT {int(per_term)}
    ) p
    GROUP BY p.evidence_id ORDER BY w DESC, p.evidence_id LIMIT {int(lexical)}
),
"""


def _neighbours(around: int, states: str) -> str:
    """The evidence right before and after each of the best `around` lexical rows in its
    session, in (time, log position) order: one index probe each side (`neighbour_of` names
    the row it is adjacent to)."""
    return f"""
top AS (
    SELECT e.id, e.session_id, e.observed_at, e.position
    FROM (SELECT evidence_id FROM lex ORDER BY w DESC, evidence_id LIMIT {int(around)}) l
    CROSS JOIN LATERAL (
        SELECT * FROM ledger.evidence x WHERE x.id = l.evidence_id LIMIT 1
    ) e
    WHERE e.scope_id = $1 AND e.session_id <> ''
),
near AS (
    SELECT nb.id AS evidence_id, t.id AS neighbour_of FROM top t
    CROSS JOIN LATERAL (
        (SELECT b.id FROM ledger.evidence b
         WHERE b.scope_id = $1 AND b.session_id = t.session_id AND b.state IN ({states})
           AND coalesce(b.claim_kind, '') NOT IN ('message', 'question', 'chatter')
           AND (b.observed_at, b.position) < (t.observed_at, t.position)
         ORDER BY b.observed_at DESC, b.position DESC LIMIT 1)
        UNION ALL
        (SELECT a.id FROM ledger.evidence a
         WHERE a.scope_id = $1 AND a.session_id = t.session_id AND a.state IN ({states})
           AND coalesce(a.claim_kind, '') NOT IN ('message', 'question', 'chatter')
           AND (a.observed_at, a.position) > (t.observed_at, t.position)
         ORDER BY a.observed_at ASC, a.position ASC LIMIT 1)
    ) nb
),
"""


_ROWS = """
SELECT e.id, left(e.content, $5) AS content, e.content_hash, e.source_class,
       e.source_label, e.scope_id, e.authority, e.claim_domain, e.session_id, e.state,
       e.confidence, e.observed_at, e.valid_from, e.valid_until, e.tokens, e.source_event_id,
       NULL::text[] AS gates, ids.neighbour_of, NULL::int AS docs, NULL::int[] AS dfs,
       e.claim_kind
FROM (SELECT evidence_id, nullif(array_remove(array_agg(DISTINCT neighbour_of), NULL), '{}')
             AS neighbour_of
      FROM ids GROUP BY evidence_id) ids
CROSS JOIN LATERAL (SELECT * FROM ledger.evidence x WHERE x.id = ids.evidence_id LIMIT 1) e
WHERE e.scope_id = $1 AND e.state IN ('active', 'superseded')
  AND coalesce(e.claim_kind, '') NOT IN ('message', 'chatter')
"""


_GATES = 16
"""The position of `gates` in a candidate row: set on rules only."""


@dataclass(frozen=True)
class Shape:
    """The limits of the candidate read (from settings)."""

    per_term: int = 16
    lexical: int = 48
    around: int = 10
    recent: int = 20


_STATS_ROW = """
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, (SELECT docs FROM n), (SELECT array_agg(df ORDER BY ord) FROM q), NULL
"""
"""One row without an id: the statistics the weights were computed from."""


def _head(shape: Shape, moment: str, states: str) -> str:
    """Statistics, lexical hits and their neighbours (`moment`: the postings' time bound)."""
    return (
        _statistics()
        + _lexical(shape.per_term, shape.lexical, moment)
        + _neighbours(shape.around, states)
    )


def now_sql(shape: Shape) -> str:
    """Candidates of the current view: $1 scope, $2 terms, $3 session, $4 extra ids,
    $5 content characters, $6 known term frequencies, $7 known scope size."""
    head = _head(shape, "", "'active'")
    return f"""
WITH {head}
in_session AS (
    SELECT id AS evidence_id FROM ledger.evidence
    WHERE scope_id = $1 AND session_id = $3 AND state = 'active'
      AND coalesce(claim_kind, '') NOT IN ('message', 'question', 'chatter')
    ORDER BY observed_at DESC LIMIT {int(shape.recent)}
),
in_scope AS (
    SELECT id AS evidence_id FROM ledger.evidence
    WHERE scope_id = $1 AND state = 'active'
      AND coalesce(claim_kind, '') NOT IN ('message', 'question', 'chatter')
    ORDER BY observed_at DESC LIMIT {int(shape.recent)}
),
ids AS (
    SELECT evidence_id, NULL::text AS neighbour_of FROM lex
    UNION ALL SELECT evidence_id, neighbour_of FROM near
    UNION ALL SELECT evidence_id, NULL FROM in_session
    UNION ALL SELECT evidence_id, NULL FROM in_scope
    UNION ALL SELECT unnest($4::text[]), NULL
)
{_ROWS}
UNION ALL
(SELECT r.id, r.text, '', 'rule', 'rule', r.scope_id, NULL, NULL, '', 'active', 0.95,
        r.updated_at, NULL, NULL, NULL, NULL, r.gates, NULL, NULL, NULL, NULL
 FROM ledger.rule r WHERE r.scope_id = $1 AND r.state = 'active'
 ORDER BY r.updated_at DESC LIMIT 50)
{_STATS_ROW}"""


def as_of_sql(shape: Shape) -> str:
    """Candidates of a past view: $1 scope, $2 terms, $3 instant, $4 extra ids,
    $5 content characters, $6 known term frequencies, $7 known scope size (superseded rows
    included; the read gate checks validity; the statistics are today's)."""
    head = _head(shape, " AND et.observed_at <= $3", "'active', 'superseded'")
    return f"""
WITH {head}
recent AS (
    SELECT id AS evidence_id FROM ledger.evidence
    WHERE scope_id = $1 AND state IN ('active', 'superseded') AND observed_at <= $3
      AND coalesce(claim_kind, '') NOT IN ('message', 'question', 'chatter')
    ORDER BY observed_at DESC LIMIT {int(shape.recent)}
),
ids AS (
    SELECT evidence_id, NULL::text AS neighbour_of FROM lex
    UNION ALL SELECT evidence_id, neighbour_of FROM near
    UNION ALL SELECT evidence_id, NULL FROM recent
    UNION ALL SELECT unnest($4::text[]), NULL
)
{_ROWS}{_STATS_ROW}"""


@dataclass(frozen=True)
class CandidateQuery:
    scope_id: str
    session_id: str
    terms: Sequence[str]
    shape: Shape = Shape()
    as_of: datetime | None = None
    extra_ids: Sequence[str] = ()
    content_chars: int = 2000
    """How much of each text to read: more than any section lets one item render."""
    known_frequencies: Mapping[str, int] = field(default_factory=dict)
    known_documents: int | None = None


@dataclass(frozen=True)
class Candidates:
    found: list[Candidate]
    stats: CorpusStats
    """The scope's statistics for the query terms, as the weights used them."""


async def candidates(conn: Conn, q: CandidateQuery) -> Candidates:
    """Evidence candidates (lexical hits, their neighbours, recent rows, other channels' ids)
    and, unless reading "as of", active rules, in one round trip; with the term statistics."""
    moment: str | datetime
    if q.as_of is None:
        sql, moment = now_sql(q.shape), q.session_id
    else:
        sql, moment = as_of_sql(q.shape), q.as_of
    found = await conn.fetch(
        sql,
        q.scope_id,
        list(q.terms),
        moment,
        list(q.extra_ids),
        q.content_chars,
        [q.known_frequencies.get(t) for t in q.terms],
        q.known_documents,
    )
    rows, stats = [], CorpusStats(1)
    for r in found:
        if r[0] is None:  # the statistics row has no id
            stats = CorpusStats(r["docs"] or 1, dict(zip(q.terms, r["dfs"] or (), strict=False)))
        elif r[_GATES] is None:
            rows.append(_evidence_candidate(r))
        else:
            rows.append(_rule_candidate(r))
    return Candidates(rows, stats)


def _evidence_candidate(r: Any) -> Candidate:
    # By position, in `_ROWS`'s column order: a recall converts some 80 rows.
    (id_, content, content_hash, source_class, source_label, scope_id, authority, claim_domain,
     session_id, state, confidence, observed_at, valid_from, valid_until, tokens,
     source_event_id, _gates, neighbour_of, _docs, _dfs, claim_kind) = r  # fmt: skip
    return Candidate(
        id=id_,
        content=content,
        content_hash=content_hash,
        source_class=source_class,
        label=source_label or _default_label(source_class),
        scope_id=scope_id,
        authority=authority,
        claim_domain=claim_domain,
        session_id=session_id,
        state=state,
        confidence=confidence,
        observed_at=observed_at,
        valid_from=valid_from,
        valid_until=valid_until,
        tokens=tokens or None,
        source_event_id=source_event_id,
        neighbours=tuple(neighbour_of or ()),
        context_only=claim_kind == "question",
    )


_DEFAULT_LABELS = {"user_input": "user", "user_correction": "user", "external_tool": "tool"}


def _default_label(source_class: str) -> str:
    return _DEFAULT_LABELS.get(source_class, source_class)


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
            # Observations age from when their evidence was last seen (the batch's latest
            # observed time), not from when the ledger stored them: a backlog distilled today
            # is as old as what it says.
            observed_at=r["observed_at"] or r["created_at"],
            evidence_ids=tuple(r["evidence_ids"] or ()),
        )
        for r in found
    ]
