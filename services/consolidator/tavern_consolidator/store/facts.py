"""The consolidator's copies of ledger facts: sessions, evidence, turns, observations, rules."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from tavern_consolidator.domain.intake import RuleView, StateChange, TurnEnd
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


async def ensure_scopes(conn: Conn, scopes: Iterable[str]) -> None:
    await conn.execute(
        "INSERT INTO consolidator.scope_state (scope_id) SELECT unnest($1::text[]) "
        "ON CONFLICT (scope_id) DO NOTHING",
        sorted(set(scopes)),
    )


async def save_evidence(conn: Conn, rows: Sequence[tuple[Evidence, bool]]) -> None:
    """Insert copies; a redelivered fact (same evidence id) changes nothing."""
    if not rows:
        return
    await conn.executemany(
        "INSERT INTO consolidator.evidence (id, scope_id, session_id, seq, event_id, text, "
        "authority, claim_domain, state, digestible, observed_at) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING",
        [
            (
                e.id,
                e.scope_id,
                e.session_id,
                e.seq,
                e.event_id,
                e.text,
                e.authority,
                e.claim_domain,
                e.state,
                ok,
                e.observed_at,
            )
            for e, ok in rows
        ],
    )


async def change_states(conn: Conn, changes: Sequence[StateChange]) -> None:
    """Follow the ledger's transitions; a redacted copy loses its text at once."""
    for c in changes:
        await conn.execute(
            "UPDATE consolidator.evidence SET state = $2, state_changed_at = $3, "
            "text = CASE WHEN $2 = 'redacted' THEN '' ELSE text END WHERE id = $1",
            c.evidence_id,
            c.state,
            c.at,
        )


async def save_turns(conn: Conn, turns: Sequence[TurnEnd]) -> list[str]:
    """One row per turn/end (redeliveries change nothing); returns the scopes they count in."""
    scopes = []
    for t in turns:
        scope = await conn.fetchval(
            "INSERT INTO consolidator.turn (event_id, session_id, scope_id, turn, ended_at) "
            "VALUES ($1, $2, coalesce((SELECT scope_id FROM consolidator.session "
            "WHERE session_id = $2), $2), $3, $4) ON CONFLICT (event_id) DO NOTHING "
            "RETURNING scope_id",
            t.event_id,
            t.session_id,
            t.turn,
            t.ended_at,
        )
        if scope is not None:
            scopes.append(str(scope))
    return scopes


async def save_observations(conn: Conn, rows: Sequence[Observation]) -> None:
    """In stream order: insert the copy, then retire what it supersedes."""
    for o in rows:
        await conn.execute(
            f"INSERT INTO consolidator.observation ({OBSERVATION_COLUMNS}) VALUES "
            "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING",
            o.id,
            o.scope_id,
            o.subject,
            o.predicate,
            o.claim_domain,
            o.authority,
            o.text,
            o.observed_at,
            list(o.evidence_ids),
            o.state,
            o.supersedes,
        )
        if o.supersedes:
            await conn.execute(
                "UPDATE consolidator.observation SET state = 'superseded', updated_at = now() "
                "WHERE id = $1 AND state = 'active'",
                o.supersedes,
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
