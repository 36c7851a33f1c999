"""User rights over the ledger: view (query, inspect, history, stats, audit), correct, and the
audited transitions quarantine / release / redact / delete / rollback. Every change writes its
audit entry and its LEDGER fact (outbox) in the same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tavern_ledger import audit, outbox
from tavern_ledger.changes import Actor, commit_change
from tavern_ledger.consolidation.observations import observation_view
from tavern_ledger.domain import lifecycle
from tavern_ledger.domain.corrections import correction_row
from tavern_ledger.domain.eligibility import Readable, ReadContext, read_gate
from tavern_ledger.domain.facts import evidence_appended, outbox_record
from tavern_ledger.domain.gates import GateConfig, write_gate
from tavern_ledger.domain.portability import iso
from tavern_ledger.domain.records import AuditEntry, EvidenceRow
from tavern_ledger.domain.segments import MESSAGE
from tavern_ledger.errors import InvalidTransition, NotFound
from tavern_ledger.evidence import Conn, observations
from tavern_ledger.evidence import rows as evidence
from tavern_ledger.evidence.rows import EvidenceFilter
from tavern_ledger.ingest import Clock, utc_now
from tavern_ledger.scopes import evidence as evidence_scope
from tavern_ledger.transactions import PoolSource, connection, transaction

CLIP_CHARS = 2000


@dataclass(frozen=True)
class Correction:
    text: str
    target_id: str | None = None
    session_id: str = ""
    scope_id: str | None = None


def evidence_view(row: EvidenceRow, clip: int = CLIP_CHARS) -> dict[str, Any]:
    """A row as replies show it (content clipped)."""
    content = (
        row.content if len(row.content) <= clip else f"{row.content[:clip]}…[{len(row.content)}]"
    )
    return {
        "evidence_id": row.id,
        "scope_id": row.scope_id,
        "session_id": row.session_id,
        "state": row.state,
        "source_class": row.source_class,
        "source_label": row.source_label,
        "authority": row.authority,
        "claim_domain": row.claim_domain,
        "content": content,
        "content_hash": row.content_hash,
        "source_event_id": row.source_event_id,
        "observed_at": iso(row.observed_at),
        "valid_from": iso(row.valid_from),
        "valid_until": iso(row.valid_until),
        "supersedes": list(row.supersedes),
        "flags": list(row.flags),
        "metadata": row.metadata,
        "claim_kind": row.claim_kind or None,
        "claim_of": row.claim_of,
    }


@dataclass(frozen=True)
class ModelQuery:
    """What a query adds beyond evidence: observations, and whether a model asked."""

    observations: bool = False
    for_model: bool = False
    text: str = ""
    state: str = "active"


def model_query_audit(scope_id: str, ask: ModelQuery, evidence: int, found: int) -> AuditEntry:
    """acp.md §10: a model's read of memory is audited (reads by people are not)."""
    return AuditEntry(
        op="model_query",
        scope_id=scope_id,
        actor="model",
        reason="acp_query tool",
        payload={
            "q": ask.text[:120],
            "state": ask.state,
            "evidence": evidence,
            "observations": found,
        },
    )


class Rights:
    def __init__(self, pool: PoolSource, gate: GateConfig, clock: Clock = utc_now) -> None:
        self._pool, self._gate, self._clock = pool, gate, clock

    # --- transitions ------------------------------------------------------------------------

    async def transition(self, evidence_id: str, op: str, actor: Actor) -> dict[str, Any]:
        """quarantine / release / redact / delete / rollback one evidence row."""
        now = self._clock()
        async with transaction(self._pool) as conn:
            row = await _locked(conn, evidence_id)
            try:
                change = lifecycle.apply(row, op, now, reason=actor.reason)
            except lifecycle.TransitionRefused as exc:
                raise InvalidTransition(str(exc), evidence_id=evidence_id) from None
            audit_id = await commit_change(conn, change, op, actor, now)
            if op == "rollback" and row.state == "superseded":
                await _revoke_replacements(conn, row.id, now)
            if row.claim_kind == MESSAGE and op in CASCADED:
                await _cascade(conn, row.id, op, actor, now)
        return {
            "evidence_id": evidence_id,
            "from_state": change.from_state,
            "to_state": change.to_state,
            "audit_id": audit_id,
        }

    # --- correct ----------------------------------------------------------------------------

    async def correct(self, c: Correction, actor: Actor) -> dict[str, Any]:
        """Write the user's correction; it supersedes its target (if any) with lineage."""
        now = self._clock()
        async with transaction(self._pool) as conn:
            target = await _locked(conn, c.target_id) if c.target_id else None
            if target is not None:
                _correctable(target)
            scope = await _scope(conn, c, target)
            domain = target.claim_domain if target else "user_preference"
            verdict = write_gate(
                c.text, source_class="user_correction", claim_domain=domain, config=self._gate
            )
            if not verdict.stored:
                audit_id = await audit.append_one(conn, _blocked(scope, c, verdict.reasons, actor))
                return {
                    "stored": False,
                    "action": "block",
                    "reasons": list(verdict.reasons),
                    "audit_id": audit_id,
                }
            session = c.session_id or (target.session_id if target else "")
            row = correction_row(
                verdict,
                target=target,
                scope_id=scope,
                session_id=session,
                claim_domain=domain,
                now=now,
            )
            return await _store_correction(conn, row, target, verdict.reasons, actor, now)

    # --- views ------------------------------------------------------------------------------

    async def query(self, f: EvidenceFilter, ask: ModelQuery | None = None) -> dict[str, Any]:
        """Evidence matching `f`; with `ask`, also the scope's active observations and (when a
        model asked) the `model_query` audit entry of the read."""
        if ask is None:
            async with connection(self._pool) as conn:
                rows = await evidence.query(conn, f)
            return {"items": [evidence_view(r) for r in rows], "count": len(rows)}
        async with transaction(self._pool) as conn:
            rows = await evidence.query(conn, f)
            scope = f.scope_id or await evidence_scope.scope_of_session(conn, f.session_id or "")
            found = await observations.active(conn, scope, f.limit) if ask.observations else []
            reply: dict[str, Any] = {
                "items": [evidence_view(r) for r in rows],
                "count": len(rows),
                "observations": [observation_view(o) for o in found],
            }
            if ask.for_model:
                await audit.append_one(conn, model_query_audit(scope, ask, len(rows), len(found)))
        return reply

    async def inspect(self, evidence_id: str) -> dict[str, Any]:
        """The row, whether recall may read it now (and why not), its lineage and audit trail."""
        async with connection(self._pool) as conn:
            row = await evidence.get(conn, evidence_id)
            if row is None:
                raise NotFound(f"evidence {evidence_id!r} not found", evidence_id=evidence_id)
            trail = await audit.query(conn, target_id=evidence_id, limit=50)
            replaced_by = [r.id for r in await evidence.superseding(conn, evidence_id)]
        refusal = read_gate(_readable(row), ReadContext(scope_id=row.scope_id))
        return {
            **evidence_view(row, clip=8000),
            "recallable": not refusal,
            "read_gate": list(refusal),
            "superseded_by": replaced_by,
            "audit": trail,
        }

    async def history(self, evidence_id: str) -> dict[str, Any]:
        """The lineage: every row linked through corrections, oldest first."""
        async with connection(self._pool) as conn:
            related = await evidence.related(conn, evidence_id)
        if evidence_id not in related:
            raise NotFound(f"evidence {evidence_id!r} not found", evidence_id=evidence_id)
        ordered = sorted(related.values(), key=lambda r: (r.observed_at, r.id))
        return {"evidence_id": evidence_id, "lineage": [evidence_view(r, 500) for r in ordered]}

    async def stats(self, scope_id: str | None) -> dict[str, Any]:
        async with connection(self._pool) as conn:
            counts = await evidence.stats(conn, scope_id)
            extra = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM ledger.observation WHERE $1::text IS NULL "
                "OR scope_id = $1) AS observations, (SELECT count(*) FROM ledger.audit "
                "WHERE $1::text IS NULL OR scope_id = $1) AS audit, "
                "(SELECT count(*) FROM ledger.outbox) AS unpublished_facts",
                scope_id,
            )
        return {"scope_id": scope_id, "evidence": counts, **dict(extra)}

    async def audit(self, **filters: Any) -> dict[str, Any]:
        async with connection(self._pool) as conn:
            items = await audit.query(conn, **filters)
        return {"items": items, "count": len(items)}


CASCADED = frozenset({"quarantine", "release", "redact", "delete"})
"""What is done to a person's message is done to the claims cut from it: a message redacted or
deleted leaves no claim that still holds its words."""


async def _cascade(
    conn: Conn, message_id: str, op: str, actor: Actor, now: datetime, replaced_by: str = ""
) -> None:
    for claim in await evidence.claims_of(conn, message_id):
        if op == "supersede" and claim.state != "active":
            continue
        try:
            change = lifecycle.apply(claim, op, now, reason=actor.reason)
        except lifecycle.TransitionRefused:
            continue  # a claim already in that state (or ended otherwise) stays as it is
        await commit_change(conn, change, op, actor, now, replaced_by=replaced_by or None)


def _readable(row: EvidenceRow) -> Readable:
    return Readable(row.state, row.scope_id, row.authority, row.claim_domain, None, row.valid_until)


async def _locked(conn: Conn, evidence_id: str) -> EvidenceRow:
    row = await evidence.get(conn, evidence_id, for_update=True)
    if row is None:
        raise NotFound(f"evidence {evidence_id!r} not found", evidence_id=evidence_id)
    return row


def _correctable(target: EvidenceRow) -> None:
    try:
        lifecycle.supersede_check(target, "user_correction")
    except lifecycle.TransitionRefused as exc:
        raise InvalidTransition(str(exc), evidence_id=target.id) from None


async def _scope(conn: Conn, c: Correction, target: EvidenceRow | None) -> str:
    if target is not None:
        return target.scope_id
    if c.scope_id:
        return c.scope_id
    return await evidence_scope.scope_of_session(conn, c.session_id)


def _blocked(scope: str, c: Correction, reasons: tuple[str, ...], actor: Actor) -> AuditEntry:
    return AuditEntry(
        op="correct_blocked",
        scope_id=scope,
        actor=actor.name,
        reason="write gate: " + ", ".join(reasons),
        target_id=c.target_id,
        payload={"reasons": list(reasons), "session_id": c.session_id, "why": actor.reason},
    )


async def _store_correction(
    conn: Conn,
    row: EvidenceRow,
    target: EvidenceRow | None,
    reasons: tuple[str, ...],
    actor: Actor,
    now: datetime,
) -> dict[str, Any]:
    inserted = await evidence.insert(conn, [row])
    if not inserted:
        return {"stored": True, "inserted": False, "evidence_id": row.id, "superseded": None}
    entry = AuditEntry(
        op="correct",
        scope_id=row.scope_id,
        actor=actor.name,
        reason=actor.reason or "user correction",
        target_id=row.id,
        payload={
            "contentHash": row.content_hash,
            "state": row.state,
            "reasons": list(reasons),
            "corrects": target.id if target else None,
        },
    )
    await audit.append_one(conn, entry)
    await outbox.enqueue(conn, [outbox_record(evidence_appended(row, now, actor.name))])
    superseded = None
    if target is not None and row.supersedes:
        change = lifecycle.apply(target, "supersede", now)
        await commit_change(conn, change, "supersede", actor, now, replaced_by=row.id)
        superseded = target.id
        if target.claim_kind == MESSAGE:  # a message corrected whole: none of its claims holds
            await _cascade(conn, target.id, "supersede", actor, now, replaced_by=row.id)
    return {
        "stored": True,
        "inserted": True,
        "evidence_id": row.id,
        "state": row.state,
        "reasons": list(reasons),
        "superseded": superseded,
    }


async def _revoke_replacements(conn: Conn, restored_id: str, now: datetime) -> None:
    for row in await evidence.superseding(conn, restored_id):
        await evidence.save_change(conn, lifecycle.revoke_replacement(row, restored_id, now))
