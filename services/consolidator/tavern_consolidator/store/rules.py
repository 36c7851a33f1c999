"""The rules channel's tables: drafts, which evidence was judged, the view of the ledger's rules."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from tavern_consolidator.domain.feedback import ActiveRule, Draft
from tavern_consolidator.domain.intake import RuleView
from tavern_consolidator.store import Conn

DRAFT_COLUMNS = (
    "id, scope_id, domain, title, text, gates, evidence_ids, state, created_at, decided_at, "
    "decided_by"
)
VIEW_COLUMNS = "id, scope_id, domain, title, text, state, pinned, evidence_ids, updated_at"


def _listed(r: Any) -> dict[str, Any]:
    data = dict(r)
    for key, value in data.items():
        if isinstance(value, datetime):
            data[key] = value.isoformat()
        elif isinstance(value, tuple | list):
            data[key] = list(value)
    return data


async def judged(conn: Conn, scope_id: str) -> frozenset[str]:
    found = await conn.fetch(
        "SELECT evidence_id FROM consolidator.rule_evidence WHERE scope_id = $1 UNION "
        "SELECT unnest(evidence_ids) FROM consolidator.rule_draft WHERE scope_id = $1 UNION "
        "SELECT unnest(evidence_ids) FROM consolidator.rule_view WHERE scope_id = $1",
        scope_id,
    )
    return frozenset(str(r[0]) for r in found)


async def count_draft_run(conn: Conn, scope_id: str, today: date) -> None:
    await conn.execute(
        "UPDATE consolidator.scope_state SET draft_count = CASE WHEN draft_day = $2 "
        "THEN draft_count + 1 ELSE 1 END, draft_day = $2 WHERE scope_id = $1",
        scope_id,
        today,
    )


async def draft_runs(conn: Conn, scope_id: str) -> tuple[date | None, int]:
    r = await conn.fetchrow(
        "SELECT draft_day, draft_count FROM consolidator.scope_state WHERE scope_id = $1",
        scope_id,
    )
    return (r["draft_day"], int(r["draft_count"])) if r else (None, 0)


async def save_draft(conn: Conn, d: Draft) -> bool:
    status = await conn.execute(
        "INSERT INTO consolidator.rule_draft (id, scope_id, domain, title, text, gates, "
        "evidence_ids) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING",
        d.id,
        d.scope_id,
        d.domain,
        d.title,
        d.text,
        list(d.gates),
        list(d.evidence_ids),
    )
    return bool(status.endswith(" 1"))


async def judge(conn: Conn, scope_id: str, evidence_id: str, outcome: str, rule_id: str) -> None:
    await conn.execute(
        "INSERT INTO consolidator.rule_evidence (evidence_id, scope_id, outcome, rule_id) "
        "VALUES ($1, $2, $3, $4) ON CONFLICT (evidence_id) DO NOTHING",
        evidence_id,
        scope_id,
        outcome,
        rule_id,
    )


async def drafts(conn: Conn, scope_id: str, state: str = "draft") -> list[dict[str, Any]]:
    found = await conn.fetch(
        f"SELECT {DRAFT_COLUMNS} FROM consolidator.rule_draft WHERE scope_id = $1 AND state = $2 "
        "ORDER BY created_at, id",
        scope_id,
        state,
    )
    return [_listed(r) for r in found]


async def decide_draft(conn: Conn, draft_id: str, state: str, actor: str) -> None:
    await conn.execute(
        "UPDATE consolidator.rule_draft SET state = $2, decided_at = now(), decided_by = $3 "
        "WHERE id = $1",
        draft_id,
        state,
        actor,
    )


async def active(conn: Conn, scope_id: str) -> list[dict[str, Any]]:
    found = await conn.fetch(
        f"SELECT {VIEW_COLUMNS} FROM consolidator.rule_view WHERE scope_id = $1 "
        "AND state = 'active' ORDER BY updated_at, id",
        scope_id,
    )
    return [_listed(r) for r in found]


def active_rules(rows: Sequence[dict[str, Any]]) -> list[ActiveRule]:
    return [ActiveRule(r["id"], r["title"], r["text"]) for r in rows]


async def replace_view(conn: Conn, scope_id: str | None, rows: Sequence[RuleView]) -> None:
    """The view is rebuilt from the ledger: what the ledger lists replaces what we had."""
    await conn.execute(
        "DELETE FROM consolidator.rule_view WHERE $1::text IS NULL OR scope_id = $1", scope_id
    )
    for r in rows:
        await conn.execute(
            f"INSERT INTO consolidator.rule_view ({VIEW_COLUMNS}) VALUES "
            "($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING",
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


async def all_active(conn: Conn) -> list[dict[str, Any]]:
    found = await conn.fetch(
        f"SELECT {VIEW_COLUMNS} FROM consolidator.rule_view WHERE state = 'active' "
        "ORDER BY domain, updated_at, id"
    )
    return [_listed(r) for r in found]
