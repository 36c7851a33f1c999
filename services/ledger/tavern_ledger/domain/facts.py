"""LEDGER facts of committed changes, with ids derived from what they describe, so publishing a
fact twice (an outbox retry, a second replica) is deduplicated by its `Nats-Msg-Id`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tavern_events import subjects
from tavern_events.envelope import LedgerFact
from tavern_events.ledger import (
    EvidenceAppended,
    EvidenceAppendedPayload,
    EvidenceOrigin,
    EvidenceStateChanged,
    EvidenceStateChangedPayload,
    ObservationUpserted,
    ObservationUpsertedPayload,
)
from tavern_events.union import encode
from tavern_ledger.domain.records import EvidenceRow, ObservationRow


@dataclass(frozen=True)
class OutboxRecord:
    """A fact ready to publish: its dedup id, subject and encoded body."""

    msg_id: str
    subject: str
    body: bytes


def outbox_record(fact: LedgerFact) -> OutboxRecord:
    return OutboxRecord(fact.id, subjects.ledger_fact(fact.scope_id, fact.type), encode(fact))


def _origin(row: EvidenceRow) -> EvidenceOrigin:
    session = row.session_id if subjects.is_valid_id(row.session_id) else None
    event = (
        row.source_event_id
        if row.source_event_id and subjects.is_valid_id(row.source_event_id)
        else None
    )
    seq = _seq_of(row.source_ref)
    return EvidenceOrigin(session_id=session, seq=seq, event_id=event)


def _seq_of(source_ref: str) -> int | None:
    tail = source_ref.rpartition(":")[2].rstrip('"}')
    return int(tail) if tail.isdigit() and int(tail) > 0 else None


def evidence_appended(row: EvidenceRow, now: datetime, actor: str = "system") -> EvidenceAppended:
    """The fact of one inserted evidence row; its id is the evidence id."""
    origin = _origin(row)
    return EvidenceAppended(
        id=row.id,
        scope_id=row.scope_id,
        ts=now,
        actor=actor,
        session_id=origin.session_id,
        causation_id=origin.event_id,
        payload=EvidenceAppendedPayload(
            evidence_id=row.id,
            content_hash=row.content_hash,
            text=row.content,
            authority=row.authority,
            claim_domain=row.claim_domain,
            state=row.state,
            ingest=row.ingest or "unknown",
            origin=origin,
            flags=row.flags,
            valid_from=row.valid_from,
            valid_to=row.valid_until,
            observed_at=row.observed_at,
            claim_kind=row.claim_kind or None,
            claim_of=row.claim_of,
            source_label=row.source_label or None,
        ),
    )


def state_changed(
    row: EvidenceRow,
    from_state: str,
    audit_id: int,
    reason: str,
    now: datetime,
    actor: str,
    replaced_by: str | None = None,
) -> EvidenceStateChanged:
    """The fact of one audited transition; its id derives from the evidence and audit ids."""
    return EvidenceStateChanged(
        id=f"{row.id}-a{audit_id}",
        scope_id=row.scope_id,
        ts=now,
        actor=actor,
        payload=EvidenceStateChangedPayload(
            evidence_id=row.id,
            from_state=from_state,
            to_state=row.state,
            reason=reason[:500],
            audit_id=str(audit_id),
            replaced_by=replaced_by,
        ),
    )


def observation_upserted(
    row: ObservationRow, now: datetime, confidence: float = 1.0
) -> ObservationUpserted:
    """The fact of one stored active observation (quarantined ones publish nothing)."""
    return ObservationUpserted(
        id=row.id,
        scope_id=row.scope_id,
        ts=now,
        actor="consolidation",
        payload=ObservationUpsertedPayload(
            observation_id=row.id,
            subject=row.subject[:200],
            predicate=row.predicate[:200],
            text=row.text,
            claim_domain=row.claim_domain,
            authority=row.authority or "single_observation",
            evidence_ids=row.evidence_ids,
            state="active",
            supersedes=row.supersedes[0] if row.supersedes else None,
            confidence=confidence,
            revision=row.id,
        ),
    )
