"""`observation.propose`: the consolidator's distilled observations, gated and stored with a
derived id, the weakest supporting authority, and same-key supersede with lineage."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tavern_events.ledger import ObservationUpserted
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
from tavern_ledger.evidence import observations
from tavern_ledger.ingest import Clock, utc_now
from tavern_ledger.transactions import PoolSource, transaction


class Observations:
    def __init__(self, pool: PoolSource, gate: GateConfig, clock: Clock = utc_now) -> None:
        self._pool, self._gate, self._clock = pool, gate, clock

    async def propose(self, proposal: Proposal, actor: Actor) -> dict[str, Any]:
        (reply,) = await self._propose_all([proposal], actor)
        if isinstance(reply, RequestInvalid):
            raise reply
        return reply

    async def propose_batch(
        self, proposals: Sequence[Proposal], actor: Actor
    ) -> list[dict[str, Any]]:
        """Every proposal in one transaction, answered in order as `propose` would; one the
        rules refuse (an unknown claim domain) is answered with its error, the others stored."""
        replies = await self._propose_all(proposals, actor)
        return [r.as_reply() if isinstance(r, RequestInvalid) else r for r in replies]

    async def _propose_all(
        self, proposals: Sequence[Proposal], actor: Actor
    ) -> list[dict[str, Any] | RequestInvalid]:
        """Gate each proposal, then store the batch in a fixed number of statements (the
        evidence's authorities, the upsert, the audit entries, the facts)."""
        ids = list(dict.fromkeys(e for p in proposals for e in p.evidence_ids))
        async with transaction(self._pool) as conn:
            authorities = await observations.evidence_authorities(conn, ids)
            decided: list[Decision | RequestInvalid] = []
            for proposal in proposals:
                try:
                    decided.append(decide(proposal, authorities, self._gate))
                except ObservationInvalid as exc:
                    decided.append(RequestInvalid(str(exc)))
            rows = [d.row for d in decided if isinstance(d, Decision) and d.row is not None]
            upserted = iter(await observations.upsert(conn, rows))
            resolvable = set(authorities)
            outcomes: list[Outcome | RequestInvalid] = []
            for proposal, decision in zip(proposals, decided, strict=True):
                if isinstance(decision, RequestInvalid):
                    outcomes.append(decision)
                    continue
                done = next(upserted) if decision.row is not None else None
                outcomes.append(Outcome(proposal, decision, done, resolvable, actor))
            entries = [o.audit for o in outcomes if isinstance(o, Outcome) and o.audit]
            audit_ids = iter(sorted(await audit.append(conn, entries)))
            facts = [o.fact(self._clock()) for o in outcomes if isinstance(o, Outcome)]
            await outbox.enqueue(conn, [outbox_record(f) for f in facts if f is not None])
        return [
            o if isinstance(o, RequestInvalid) else o.reply(next(audit_ids, 0) if o.audit else 0)
            for o in outcomes
        ]

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


class Outcome:
    """One proposal's outcome in a batch: what it audits, publishes and answers."""

    def __init__(
        self,
        proposal: Proposal,
        decision: Decision,
        upserted: observations.Upserted | None,
        resolvable: set[str],
        actor: Actor,
    ) -> None:
        self.decision, self.upserted = decision, upserted
        self.tier = backlink_tier(upserted.row, resolvable) if upserted else None
        self.audit: AuditEntry | None = None
        if upserted is None:
            self.audit = _blocked(proposal, decision.verdict.reasons, actor)
        elif upserted.inserted:
            reasons = decision.verdict.reasons
            self.audit = _upsert_audit(upserted, reasons, str(self.tier), actor, decision)

    def fact(self, now: datetime) -> ObservationUpserted | None:
        """An inserted active row is published; a held or repeated one is not."""
        u = self.upserted
        if u is None or not u.inserted or u.row.state != "active":
            return None
        return observation_upserted(u.row, now)

    def reply(self, audit_id: int) -> dict[str, Any]:
        u, reasons = self.upserted, list(self.decision.verdict.reasons)
        if u is None:
            return {"stored": False, "action": "block", "reasons": reasons, "audit_id": audit_id}
        return {
            "stored": True,
            "inserted": u.inserted,
            "observation_id": u.row.id,
            "state": u.row.state,
            "authority": u.row.authority,
            "derived_authority": self.decision.derived_authority,
            "release": self.decision.release.as_json(),
            "superseded": u.superseded_id,
            "reasons": reasons,
            "backlink": self.tier,
            "alert": self.tier == "missing_backlink",
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
