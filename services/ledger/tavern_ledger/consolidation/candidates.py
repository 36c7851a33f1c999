"""Expression (behaviour) candidates kept for recall (acp.md §17.1): an append-only event log
replayed into a five-state projection. The id derives from the scope, domain and evidence set, so
proposing the same candidate twice finds the first; illegal transitions are refused."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tavern_ledger import audit
from tavern_ledger.changes import Actor
from tavern_ledger.domain.ids import sha256_hex
from tavern_ledger.domain.portability import CANDIDATE_TRANSITIONS
from tavern_ledger.domain.records import AuditEntry
from tavern_ledger.errors import InvalidTransition, NotFound
from tavern_ledger.evidence import Conn
from tavern_ledger.transactions import PoolSource, connection, transaction

COLUMNS = (
    "id, scope_id, domain, evidence_ids, state, policy, decision_reason, created_at, updated_at"
)
REVIEW_STATUS = {"promote": "promoted", "reject": "dismissed"}
"""Candidate event -> the `reviewStatus` its evidence gets."""
AUDIT_OP = {"promote": "promote", "reject": "dismiss", "rollback": "rollback"}


def candidate_id(scope_id: str, domain: str, evidence_ids: Sequence[str]) -> str:
    """`cand_` + 16 hex of scope, domain and the sorted evidence set (order does not matter)."""
    members = ",".join(sorted(set(evidence_ids)))
    return "cand_" + sha256_hex(f"{scope_id}|{domain}|{members}")[:16]


def allowed_events(state: str) -> list[str]:
    return [e for e, (src, _) in CANDIDATE_TRANSITIONS.items() if src == state]


def next_state(candidate: str, state: str, event: str) -> str:
    """The state after `event`, or InvalidTransition (acp.md §17.1 message)."""
    src, dst = CANDIDATE_TRANSITIONS[event]
    if src != state:
        allowed = "|".join(allowed_events(state)) or "none"
        raise InvalidTransition(
            f"illegal transition: candidate '{candidate}' is '{state}', cannot apply event "
            f"'{event}' (allowed: {allowed})"
        )
    return dst


@dataclass(frozen=True)
class Proposal:
    scope_id: str
    domain: str
    evidence_ids: tuple[str, ...]
    policy: dict[str, Any] | None
    pending: bool = True


def candidate_view(row: Any) -> dict[str, Any]:
    policy = row["policy"]
    return {
        "candidate_id": row["id"],
        "scope_id": row["scope_id"],
        "domain": row["domain"],
        "evidence_ids": list(row["evidence_ids"]),
        "state": row["state"],
        "policy": json.loads(policy) if isinstance(policy, str) else policy,
        "decision_reason": row["decision_reason"],
        "created_at": row["created_at"].isoformat(),
        "updated_at": row["updated_at"].isoformat(),
    }


class Candidates:
    def __init__(self, pool: PoolSource) -> None:
        self._pool = pool

    async def create(self, p: Proposal, actor: Actor) -> dict[str, Any]:
        """Propose a candidate; an existing one (any state) is returned as it is."""
        cid = candidate_id(p.scope_id, p.domain, p.evidence_ids)
        async with transaction(self._pool) as conn:
            row = await conn.fetchrow(
                "INSERT INTO ledger.candidate (id, scope_id, domain, evidence_ids, policy) "
                "VALUES ($1, $2, $3, $4, $5::jsonb) ON CONFLICT (id) DO NOTHING "
                f"RETURNING {COLUMNS}",
                cid,
                p.scope_id,
                p.domain,
                sorted(set(p.evidence_ids)),
                _json(p.policy),
            )
            if row is None:
                return {"created": False, "candidate": candidate_view(await _get(conn, cid))}
            payload = {
                "scopeId": p.scope_id,
                "domain": p.domain,
                "evidenceIds": list(p.evidence_ids),
            }
            await _event(conn, cid, "create", actor, {**payload, "policy": p.policy})
            if p.pending:
                await _review_status(conn, p.evidence_ids, "pending_promotion")
        return {"created": True, "candidate": candidate_view(row)}

    async def transition(
        self, cid: str, event: str, actor: Actor, policy: dict[str, Any] | None
    ) -> dict[str, Any]:
        async with transaction(self._pool) as conn:
            row = await _get(conn, cid, lock=True)
            state = next_state(cid, row["state"], event)
            row = await conn.fetchrow(
                "UPDATE ledger.candidate SET state = $2, decision_reason = $3, "
                "policy = coalesce($4::jsonb, policy), updated_at = now() WHERE id = $1 "
                f"RETURNING {COLUMNS}",
                cid,
                state,
                actor.reason or event,
                _json(policy),
            )
            await _event(conn, cid, event, actor, {"policy": policy} if policy else None)
            await _audit(conn, row, event, actor, policy)
            if event in REVIEW_STATUS:
                await _review_status(conn, row["evidence_ids"], REVIEW_STATUS[event])
        return {"candidate": candidate_view(row)}

    async def listing(
        self, scope_id: str | None, state: str | None, domain: str | None, limit: int
    ) -> dict[str, Any]:
        async with connection(self._pool) as conn:
            found = await conn.fetch(
                f"SELECT {COLUMNS} FROM ledger.candidate WHERE ($1::text IS NULL OR scope_id = $1)"
                " AND ($2::text IS NULL OR state = $2) AND ($3::text IS NULL OR domain = $3) "
                "ORDER BY created_at, id LIMIT $4",
                scope_id,
                state,
                domain,
                limit,
            )
        return {"candidates": [candidate_view(r) for r in found]}


async def _get(conn: Conn, cid: str, *, lock: bool = False) -> Any:
    suffix = " FOR UPDATE" if lock else ""
    row = await conn.fetchrow(f"SELECT {COLUMNS} FROM ledger.candidate WHERE id = $1{suffix}", cid)
    if row is None:
        raise NotFound(f"candidate '{cid}' not found")
    return row


async def _event(
    conn: Conn, cid: str, event: str, actor: Actor, payload: dict[str, Any] | None
) -> None:
    await conn.execute(
        "INSERT INTO ledger.candidate_events (candidate_id, event, reason, actor, payload) "
        "VALUES ($1, $2, $3, $4, $5::jsonb)",
        cid,
        event,
        actor.reason,
        actor.name,
        _json(payload),
    )


async def _audit(
    conn: Conn, row: Any, event: str, actor: Actor, policy: dict[str, Any] | None
) -> None:
    op = AUDIT_OP.get(event)
    if op is None:
        return
    entry = AuditEntry(
        op=op,
        scope_id=row["scope_id"],
        actor=actor.name,
        reason=actor.reason or event,
        target_id=row["id"],
        payload={"policy": policy} if policy else None,
    )
    await audit.append_one(conn, entry)


async def _review_status(conn: Conn, evidence_ids: Sequence[str], status: str) -> None:
    """Mark the candidate's active evidence (a pending mark never overrides a decision)."""
    guard = (
        " AND coalesce(metadata->>'reviewStatus', '') NOT IN ('pending_promotion', 'promoted')"
        if status == "pending_promotion"
        else ""
    )
    await conn.execute(
        "UPDATE ledger.evidence SET updated_at = now(), "
        "metadata = metadata || jsonb_build_object('reviewStatus', $2::text) "
        "WHERE id = ANY($1::text[]) AND state = 'active'" + guard,
        list(evidence_ids),
        status,
    )


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)
