"""The consolidator's copies of ledger facts: sessions, evidence, turns, observations, rules."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tavern_consolidator.domain.intake import (
    FACTUAL,
    Changes,
    RuleView,
    StateChange,
    TurnEnd,
)
from tavern_consolidator.domain.records import Evidence, Observation
from tavern_consolidator.store import Conn

EVIDENCE_COLUMNS = (
    "id, scope_id, session_id, text, authority, claim_domain, observed_at, state, seq, "
    "event_id, state_changed_at"
)
OBSERVATION_COLUMNS = (
    "id, scope_id, subject, predicate, claim_domain, authority, text, observed_at, evidence_ids, "
    "state, supersedes"
)


def evidence_row(r: Any) -> Evidence:
    return Evidence(**dict(r))


def observation_row(r: Any) -> Observation:
    data = dict(r)
    data["evidence_ids"] = tuple(data["evidence_ids"] or ())
    return Observation(**data)


async def save_sessions(conn: Conn, sessions: dict[str, str]) -> None:
    if sessions:
        await conn.execute(
            "INSERT INTO consolidator.session (session_id, scope_id) "
            "SELECT * FROM unnest($1::text[], $2::text[]) "
            "ON CONFLICT (session_id) DO UPDATE SET scope_id = excluded.scope_id",
            list(sessions),
            list(sessions.values()),
        )


async def save_evidence(
    conn: Conn, rows: Sequence[tuple[Evidence, bool]], judging: bool = False
) -> None:
    """Insert copies and their scopes' state rows in one statement; a redelivered fact (same
    evidence id) changes nothing. `judging`: new active claims of fact await the model."""
    if not rows:
        return
    await conn.execute(
        "WITH scopes AS (INSERT INTO consolidator.scope_state (scope_id) "
        "SELECT DISTINCT s FROM unnest($2::text[]) AS s ORDER BY s "
        "ON CONFLICT (scope_id) DO NOTHING) "
        "INSERT INTO consolidator.evidence (id, scope_id, session_id, seq, event_id, text, "
        "authority, claim_domain, state, digestible, observed_at, claim_kind, claim_of, speaker, "
        "judge_pending) "
        "SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], "
        "$6::text[], $7::text[], $8::text[], $9::text[], $10::boolean[], $11::timestamptz[], "
        "$12::text[], $13::text[], $14::text[], $15::boolean[]) "
        "ON CONFLICT (id) DO NOTHING",
        [e.id for e, _ in rows],
        [e.scope_id for e, _ in rows],
        [e.session_id for e, _ in rows],
        [e.seq for e, _ in rows],
        [e.event_id for e, _ in rows],
        [e.text for e, _ in rows],
        [e.authority for e, _ in rows],
        [e.claim_domain for e, _ in rows],
        [e.state for e, _ in rows],
        [ok for _, ok in rows],
        [e.observed_at for e, _ in rows],
        [e.claim_kind or None for e, _ in rows],
        [e.claim_of for e, _ in rows],
        [e.speaker for e, _ in rows],
        [judging and e.state == "active" and e.claim_kind in FACTUAL for e, _ in rows],
    )


async def not_to_judge(conn: Conn, ids: Sequence[str]) -> None:
    """Claims the ledger already used to supersede others await no judgement."""
    if ids:
        await conn.execute(
            "UPDATE consolidator.evidence SET judge_pending = false "
            "WHERE id = ANY($1::text[]) AND judge_pending",
            list(ids),
        )


async def change_states(conn: Conn, changes: Sequence[StateChange]) -> None:
    """Follow the ledger's transitions, in order (one round trip); a redacted copy loses its
    text at once."""
    if changes:
        await conn.executemany(
            "UPDATE consolidator.evidence SET state = $2, state_changed_at = $3, "
            "text = CASE WHEN $2 = 'redacted' THEN '' ELSE text END WHERE id = $1",
            [(c.evidence_id, c.state, c.at) for c in changes],
        )


async def save_turns(conn: Conn, turns: Sequence[TurnEnd]) -> list[str]:
    """One row per turn/end (redeliveries change nothing) and its scope's state row, in one
    statement; returns the scopes the new rows count in."""
    if not turns:
        return []
    found = await conn.fetch(
        "WITH added AS (INSERT INTO consolidator.turn (event_id, session_id, scope_id, turn, "
        "ended_at) SELECT e, s, coalesce((SELECT scope_id FROM consolidator.session "
        "WHERE session_id = s), s), n, t "
        "FROM unnest($1::text[], $2::text[], $3::integer[], $4::timestamptz[]) AS u(e, s, n, t) "
        "ON CONFLICT (event_id) DO NOTHING RETURNING scope_id), "
        "scopes AS (INSERT INTO consolidator.scope_state (scope_id) "
        "SELECT DISTINCT scope_id FROM added ORDER BY scope_id "
        "ON CONFLICT (scope_id) DO NOTHING) "
        "SELECT scope_id FROM added",
        [t.event_id for t in turns],
        [t.session_id for t in turns],
        [t.turn for t in turns],
        [t.ended_at for t in turns],
    )
    return [str(r["scope_id"]) for r in found]


def statements(changes: Changes) -> int:
    """How many statements saving `changes` takes (one needs no transaction around it)."""
    c = changes
    return (
        bool(c.sessions)
        + bool(c.evidence)
        + len(c.states)
        + len(c.observations)
        + any(o.supersedes for o in c.observations)
        + len(c.rules)
        + bool(c.turns)
        + bool(c.replacing)
    )


async def save_observations(conn: Conn, rows: Sequence[Observation]) -> None:
    """Insert the copies (one round trip), then retire what they supersede (one statement): a
    fact only ever supersedes an observation whose own fact came before it."""
    if not rows:
        return
    await conn.executemany(
        f"INSERT INTO consolidator.observation ({OBSERVATION_COLUMNS}) VALUES "
        "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING",
        [
            (o.id, o.scope_id, o.subject, o.predicate, o.claim_domain, o.authority, o.text,
             o.observed_at, list(o.evidence_ids), o.state, o.supersedes)
            for o in rows
        ],
    )  # fmt: skip
    retired = [o.supersedes for o in rows if o.supersedes]
    if retired:
        await conn.execute(
            "UPDATE consolidator.observation SET state = 'superseded', updated_at = now() "
            "WHERE id = ANY($1::text[]) AND state = 'active'",
            retired,
        )


async def save_rules(conn: Conn, rows: Sequence[RuleView]) -> None:
    for r in rows:
        await save_rule(conn, r)


async def save_rule(conn: Conn, r: RuleView) -> None:
    await conn.execute(
        "INSERT INTO consolidator.rule_view (id, scope_id, domain, title, text, state, pinned, "
        "evidence_ids, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
        "ON CONFLICT (id) DO UPDATE SET state = excluded.state, pinned = excluded.pinned, "
        "title = excluded.title, updated_at = excluded.updated_at",
        r.id,
        r.scope_id,
        r.domain,
        r.title,
        r.text,
        r.state,
        r.pinned,
        list(r.evidence_ids),
        r.at,
    )


async def scope_of_session(conn: Conn, session_id: str) -> str:
    found = await conn.fetchval(
        "SELECT scope_id FROM consolidator.session WHERE session_id = $1", session_id
    )
    return str(found) if found else session_id


async def evidence_in(conn: Conn, ids: Sequence[str]) -> dict[str, Evidence]:
    found = await conn.fetch(
        f"SELECT {EVIDENCE_COLUMNS} FROM consolidator.evidence WHERE id = ANY($1::text[])",
        list(ids),
    )
    return {r["id"]: evidence_row(r) for r in found}


async def evidence_of_scope(conn: Conn, scope_id: str) -> list[Evidence]:
    found = await conn.fetch(
        f"SELECT {EVIDENCE_COLUMNS} FROM consolidator.evidence WHERE scope_id = $1 "
        "ORDER BY observed_at, id",
        scope_id,
    )
    return [evidence_row(r) for r in found]


async def human_evidence_since(conn: Conn, scope_id: str, since: datetime) -> list[Evidence]:
    found = await conn.fetch(
        f"SELECT {EVIDENCE_COLUMNS} FROM consolidator.evidence WHERE scope_id = $1 "
        "AND state = 'active' AND authority IN ('user_explicit', 'user_correction') "
        "AND observed_at >= $2 ORDER BY observed_at, id LIMIT 200",
        scope_id,
        since,
    )
    return [evidence_row(r) for r in found]


async def observations_of_scope(
    conn: Conn, scope_id: str, domains: Sequence[str] | None = None, active_only: bool = False
) -> list[Observation]:
    found = await conn.fetch(
        f"SELECT {OBSERVATION_COLUMNS} FROM consolidator.observation WHERE scope_id = $1 "
        "AND ($2::text[] IS NULL OR claim_domain = ANY($2::text[])) "
        "AND (NOT $3 OR state = 'active') ORDER BY observed_at, id",
        scope_id,
        list(domains) if domains is not None else None,
        active_only,
    )
    return [observation_row(r) for r in found]


async def scopes_with_observations(conn: Conn) -> list[str]:
    found = await conn.fetch("SELECT DISTINCT scope_id FROM consolidator.observation ORDER BY 1")
    return [str(r["scope_id"]) for r in found]
