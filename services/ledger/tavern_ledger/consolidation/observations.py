"""`observation.propose`: the consolidator's distilled observations, gated and stored with a
derived id, the weakest supporting authority, and same-key supersede with lineage."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tavern_ledger import audit, outbox
from tavern_ledger.changes import Actor
from tavern_ledger.domain.facts import observation_upserted, outbox_record
from tavern_ledger.domain.gates import GateConfig
from tavern_ledger.domain.observations import (
    Decision,
    ObservationInvalid,
    Proposal,
    backlink_tier,
    decide,
)
from tavern_ledger.domain.records import AuditEntry, ObservationRow
from tavern_ledger.errors import InvalidTransition, NotFound, RequestInvalid
from tavern_ledger.evidence import Conn, observations
from tavern_ledger.ingest import Clock, utc_now
from tavern_ledger.transactions import PoolSource, transaction


class Observations:
    def __init__(self, pool: PoolSource, gate: GateConfig, clock: Clock = utc_now) -> None:
        self._pool, self._gate, self._clock = pool, gate, clock

    async def propose(self, proposal: Proposal, actor: Actor) -> dict[str, Any]:
        async with transaction(self._pool) as conn:
            authorities = await observations.evidence_authorities(conn, proposal.evidence_ids)
            return await self._propose(conn, proposal, authorities, actor)

    async def propose_batch(
        self, proposals: Sequence[Proposal], actor: Actor
    ) -> list[dict[str, Any]]:
        """Every proposal in one transaction, answered in order as `propose` would; one the
        rules refuse (an unknown claim domain) is answered with its error, the others stored."""
        ids = list(dict.fromkeys(e for p in proposals for e in p.evidence_ids))
        replies: list[dict[str, Any]] = []
        async with transaction(self._pool) as conn:
            authorities = await observations.evidence_authorities(conn, ids)
            for proposal in proposals:
                try:
                    replies.append(await self._propose(conn, proposal, authorities, actor))
                except RequestInvalid as exc:
                    replies.append(exc.as_reply())
        return replies

    async def _propose(
        self, conn: Conn, proposal: Proposal, authorities: Mapping[str, str], actor: Actor
    ) -> dict[str, Any]:
        try:
            decision = decide(proposal, authorities, self._gate)
        except ObservationInvalid as exc:
            raise RequestInvalid(str(exc)) from None
        if decision.row is None:
            audit_id = await audit.append_one(
                conn, _blocked(proposal, decision.verdict.reasons, actor)
            )
            return {
                "stored": False,
                "action": "block",
                "reasons": list(decision.verdict.reasons),
                "audit_id": audit_id,
            }
        return await self._store(conn, decision.row, decision, set(authorities), actor)

    async def release(self, observation_id: str, actor: Actor) -> dict[str, Any]:
        """A person's review of a held observation: it becomes active (acp.md §15's human
        queue), superseding the active one of its key; audited, and its fact published."""
        async with transaction(self._pool) as conn:
            row = await observations.locked(conn, observation_id)
            if row is None:
                raise NotFound(f"no observation {observation_id!r}")
            if row.state != "quarantined":
                raise InvalidTransition(
                    f"only a held (quarantined) observation is released; {row.id} is {row.state}"
                )
            activated = await observations.activate(conn, row)
            audit_id = await audit.append_one(conn, _release_audit(activated, actor))
            fact = observation_upserted(activated.row, self._clock())
            await outbox.enqueue(conn, [outbox_record(fact)])
        return {
            "observation_id": row.id,
            "from_state": "quarantined",
            "to_state": "active",
            "superseded": activated.superseded_id,
            "audit_id": audit_id,
        }

    async def scope_of(self, observation_id: str) -> str | None:
        async with transaction(self._pool) as conn:
            row = await observations.get(conn, observation_id)
        return row.scope_id if row else None

    async def listing(self, scope_id: str, state: str | None, limit: int) -> dict[str, Any]:
        async with transaction(self._pool) as conn:
            rows = await observations.listing(conn, scope_id, state, limit)
        return {"items": [observation_view(r) for r in rows], "count": len(rows)}

    async def _store(
        self,
        conn: Conn,
        row: ObservationRow,
        decision: Decision,
        resolvable: set[str],
        actor: Actor,
    ) -> dict[str, Any]:
        reasons = decision.verdict.reasons
        upserted = await observations.upsert(conn, row)
        tier = backlink_tier(upserted.row, resolvable)
        if upserted.inserted:
            entry = _upsert_audit(upserted, reasons, tier, actor, decision)
            await audit.append_one(conn, entry)
            if upserted.row.state == "active":
                fact = observation_upserted(upserted.row, self._clock())
                await outbox.enqueue(conn, [outbox_record(fact)])
        return {
            "stored": True,
            "inserted": upserted.inserted,
            "observation_id": upserted.row.id,
            "state": upserted.row.state,
            "authority": upserted.row.authority,
            "derived_authority": decision.derived_authority,
            "release": decision.release.as_json(),
            "superseded": upserted.superseded_id,
            "reasons": list(reasons),
            "backlink": tier,
            "alert": tier == "missing_backlink",
        }


def _upsert_audit(
    upserted: observations.Upserted,
    reasons: tuple[str, ...],
    tier: str,
    actor: Actor,
    decision: Decision,
) -> AuditEntry:
    return AuditEntry(
        op="observation-upsert",
        scope_id=upserted.row.scope_id,
        actor=actor.name,
        reason=actor.reason or "observation upserted",
        target_id=upserted.row.id,
        payload={
            "supersededId": upserted.superseded_id,
            "state": upserted.row.state,
            "reasons": list(reasons),
            "backlink": tier,
            "release": decision.release.as_json(),
            "authority": upserted.row.authority,
            "derivedAuthority": decision.derived_authority,
        },
    )


def _release_audit(released: observations.Upserted, actor: Actor) -> AuditEntry:
    return AuditEntry(
        op="observation-release",
        scope_id=released.row.scope_id,
        actor=actor.name,
        reason=actor.reason or "held observation released after review",
        target_id=released.row.id,
        payload={"supersededId": released.superseded_id, "flags": list(released.row.flags)},
    )


def observation_view(row: ObservationRow) -> dict[str, Any]:
    """A row as replies show it."""
    return {
        "observation_id": row.id,
        "subject": row.subject,
        "predicate": row.predicate,
        "claim_domain": row.claim_domain,
        "authority": row.authority or "single_observation",
        "text": row.text,
        "state": row.state,
        "flags": list(row.flags),
        "evidence_ids": list(row.evidence_ids),
        "observed_at": row.observed_at.isoformat(),
    }


def _blocked(p: Proposal, reasons: tuple[str, ...], actor: Actor) -> AuditEntry:
    return AuditEntry(
        op="observation_blocked",
        scope_id=p.scope_id,
        actor=actor.name,
        reason="write gate: " + ", ".join(reasons),
        payload={"subject": p.subject, "predicate": p.predicate, "reasons": list(reasons)},
    )
