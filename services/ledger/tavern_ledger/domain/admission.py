"""Admission of one write: the write gate's verdict plus the ingest path decide whether a draft
becomes an evidence row (and in which state), or is refused with the reasons to audit.
"""

from __future__ import annotations

from dataclasses import dataclass

from tavern_ledger.domain.extract import Draft
from tavern_ledger.domain.gates import GateConfig, GateVerdict, write_gate
from tavern_ledger.domain.ids import (
    content_hash,
    evidence_id_of_json,
    js_json,
    session_source_ref,
)
from tavern_ledger.domain.records import AuditEntry, EvidenceRow
from tavern_ledger.domain.text import estimate_tokens
from tavern_ledger.domain.vocabulary import TRUSTED_INGESTS, consistency_error


@dataclass(frozen=True)
class Admitted:
    row: EvidenceRow
    verdict: GateVerdict
    reasons: tuple[str, ...]
    """Everything behind the row's state (gate findings and an untrusted ingest path)."""


@dataclass(frozen=True)
class Refused:
    """Nothing is stored; `audit` says why (it never carries the refused text)."""

    reasons: tuple[str, ...]
    audit: AuditEntry


def admit_draft(draft: Draft, scope_id: str, config: GateConfig) -> Admitted | Refused:
    """Gate one ingested draft; its id derives from its session position and content."""
    verdict = write_gate(
        draft.text,
        source_class=draft.source_class,
        claim_domain=draft.claim_domain,
        config=config,
        sensitivity=draft.sensitivity,
    )
    if not verdict.stored:
        return Refused(verdict.reasons, _refusal_audit(draft, scope_id, verdict))
    inconsistent = consistency_error(draft.source_class, draft.authority)
    if inconsistent:
        reasons = (f"authority:{inconsistent}",)
        return Refused(reasons, _refusal_audit(draft, scope_id, verdict, reasons))
    untrusted = () if draft.ingest in TRUSTED_INGESTS else (f"ingest:untrusted:{draft.ingest}",)
    state = "quarantined" if verdict.action == "quarantine" or untrusted else "active"
    return Admitted(_row(draft, scope_id, verdict, state), verdict, verdict.reasons + untrusted)


def _row(draft: Draft, scope_id: str, verdict: GateVerdict, state: str) -> EvidenceRow:
    digest = content_hash(verdict.text)
    ref = js_json(session_source_ref(draft.session_id, draft.seq))
    return EvidenceRow(
        id=evidence_id_of_json(ref, digest),
        scope_id=scope_id,
        session_id=draft.session_id,
        source_class=draft.source_class,
        authority=draft.authority,
        claim_domain=draft.claim_domain,
        content=verdict.text,
        content_hash=digest,
        observed_at=draft.observed_at,
        confidence=draft.confidence,
        durability=draft.durability,
        sensitivity=draft.sensitivity,
        session_type=draft.session_type,
        agent_key=draft.agent_key,
        source_ref=ref,
        source_event_id=draft.event_id,
        source_label=draft.label,
        ingest=draft.ingest,
        flags=verdict.flags,
        tokens=estimate_tokens(verdict.text),
        state=state,
    )


def _refusal_audit(
    draft: Draft, scope_id: str, verdict: GateVerdict, reasons: tuple[str, ...] = ()
) -> AuditEntry:
    return AuditEntry(
        op="ingest_blocked",
        scope_id=scope_id,
        actor="system",
        reason="write gate: " + ", ".join(reasons or verdict.reasons),
        target_id=draft.event_id,
        payload={
            "session_id": draft.session_id,
            "seq": draft.seq,
            "source_class": draft.source_class,
            "claim_domain": draft.claim_domain,
            "reasons": list(reasons or verdict.reasons),
        },
        dedupe_key=f"ingest:{draft.event_id}",
    )
