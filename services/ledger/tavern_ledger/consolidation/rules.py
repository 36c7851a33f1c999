"""Feedback-channel rules kept for recall (acp.md §18.4): activation (idempotent by id, an optional
predecessor superseded with lineage), pin/unpin (the `always` gate) and listing. Each change is
audited and published as a RuleChanged fact in the same transaction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tavern_ledger import audit, outbox
from tavern_ledger.changes import Actor
from tavern_ledger.consolidation.facts import PINNED_GATE, rule_changed
from tavern_ledger.domain.facts import outbox_record
from tavern_ledger.domain.ids import rule_id
from tavern_ledger.domain.records import AuditEntry
from tavern_ledger.errors import InvalidTransition, NotFound
from tavern_ledger.evidence import Conn
from tavern_ledger.ingest import Clock, utc_now
from tavern_ledger.transactions import PoolSource, connection, transaction

COLUMNS = (
    "id, scope_id, domain, title, text, gates, evidence_ids, supersedes, state, source, "
    "created_at, updated_at, active_from, active_until"
)


@dataclass(frozen=True)
class Activation:
    scope_id: str
    domain: str
    title: str
    text: str
    gates: tuple[str, ...]
    evidence_ids: tuple[str, ...]
    supersedes: str | None = None
    source: str = "feedback"

    @property
    def rule_id(self) -> str:
        return rule_id(self.scope_id, self.domain, self.text)


def rule_view(row: dict[str, Any]) -> dict[str, Any]:
    view = {k: row[k] for k in ("id", "scope_id", "domain", "title", "text", "state", "source")}
    view.update(
        gates=list(row["gates"]),
        evidence_ids=list(row["evidence_ids"]),
        supersedes=row["supersedes"] or None,
        pinned=PINNED_GATE in row["gates"],
        updated_at=row["updated_at"].isoformat(),
    )
    return view


async def _get(conn: Conn, rid: str, *, lock: bool = False) -> dict[str, Any] | None:
    suffix = " FOR UPDATE" if lock else ""
    found = await conn.fetchrow(f"SELECT {COLUMNS} FROM ledger.rule WHERE id = $1{suffix}", rid)
    return dict(found) if found else None


class Rules:
    def __init__(self, pool: PoolSource, clock: Clock = utc_now) -> None:
        self._pool, self._clock = pool, clock

    async def activate(self, a: Activation, actor: Actor) -> dict[str, Any]:
        """Store `a` as an active rule; the same scope, domain and text is the same rule."""
        now = self._clock()
        async with transaction(self._pool) as conn:
            existing = await _get(conn, a.rule_id)
            if existing is not None:
                return {"inserted": False, "superseded": None, "rule": rule_view(existing)}
            old = await self._predecessor(conn, a)
            row = await self._insert(conn, a, now)
            await self._changed(conn, row, "rule_approved", actor, now)
            if old is not None:
                old = await self._retire(conn, old, now)
                await self._changed(conn, old, "rule_superseded", actor, now)
        return {"inserted": True, "superseded": a.supersedes, "rule": rule_view(row)}

    async def pin(self, rid: str, pinned: bool, actor: Actor) -> dict[str, Any]:
        """Add or remove the `always` gate of an active rule (a pinned rule is boosted)."""
        now = self._clock()
        async with transaction(self._pool) as conn:
            row = await _get(conn, rid, lock=True)
            if row is None:
                raise NotFound(f"rule '{rid}' not found")
            if row["state"] != "active":
                raise InvalidTransition(f"rule '{rid}' is {row['state']}, not active")
            gates = [g for g in row["gates"] if g != PINNED_GATE] + ([PINNED_GATE] * pinned)
            if gates != list(row["gates"]):
                row = await self._save_gates(conn, rid, gates, now)
                await self._changed(conn, row, "rule_gates_updated", actor, now)
        return {"rule": rule_view(row)}

    async def listing(self, scope_id: str | None, state: str | None, limit: int) -> dict[str, Any]:
        async with connection(self._pool) as conn:
            found = await conn.fetch(
                f"SELECT {COLUMNS} FROM ledger.rule WHERE ($1::text IS NULL OR scope_id = $1) "
                "AND ($2::text IS NULL OR state = $2) ORDER BY created_at, id LIMIT $3",
                scope_id,
                state,
                limit,
            )
        return {"rules": [rule_view(dict(r)) for r in found]}

    async def _predecessor(self, conn: Conn, a: Activation) -> dict[str, Any] | None:
        if not a.supersedes:
            return None
        old = await _get(conn, a.supersedes, lock=True)
        if old is None:
            raise NotFound(f"superseded rule '{a.supersedes}' not found")
        if old["state"] != "active":
            raise InvalidTransition(f"rule '{a.supersedes}' is {old['state']}, not active")
        return old

    async def _insert(self, conn: Conn, a: Activation, now: datetime) -> dict[str, Any]:
        found = await conn.fetchrow(
            "INSERT INTO ledger.rule (id, scope_id, domain, title, text, gates, evidence_ids, "
            "supersedes, state, source, created_at, updated_at, active_from) VALUES "
            "($1, $2, $3, $4, $5, $6, $7, $8, 'active', $9, $10, $10, $10) "
            f"RETURNING {COLUMNS}",
            a.rule_id,
            a.scope_id,
            a.domain,
            a.title,
            a.text,
            list(dict.fromkeys(a.gates)),
            list(a.evidence_ids),
            a.supersedes or "",
            a.source,
            now,
        )
        return dict(found)

    async def _retire(self, conn: Conn, old: dict[str, Any], now: datetime) -> dict[str, Any]:
        found = await conn.fetchrow(
            "UPDATE ledger.rule SET state = 'superseded', active_until = $2, updated_at = $2 "
            f"WHERE id = $1 RETURNING {COLUMNS}",
            old["id"],
            now,
        )
        return dict(found)

    async def _save_gates(
        self, conn: Conn, rid: str, gates: list[str], now: datetime
    ) -> dict[str, Any]:
        found = await conn.fetchrow(
            f"UPDATE ledger.rule SET gates = $2, updated_at = $3 WHERE id = $1 RETURNING {COLUMNS}",
            rid,
            gates,
            now,
        )
        return dict(found)

    async def _changed(
        self, conn: Conn, row: dict[str, Any], op: str, actor: Actor, now: datetime
    ) -> None:
        entry = AuditEntry(
            op=op,
            scope_id=row["scope_id"],
            actor=actor.name,
            reason=actor.reason or op.replace("_", " "),
            target_id=row["id"],
            payload={"domain": row["domain"], "gates": list(row["gates"]), "title": row["title"]},
        )
        audit_id = await audit.append_one(conn, entry)
        fact = rule_changed(row, audit_id, now, actor.name)
        await outbox.enqueue(conn, [outbox_record(fact)])
