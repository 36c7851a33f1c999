"""Admission of one write: the write gate's verdict plus the ingest path decide whether a draft
becomes an evidence row (and in which state), or is refused with the reasons to audit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tavern_ledger.domain.claims import claim_domain
from tavern_ledger.domain.extract import Draft
from tavern_ledger.domain.gates import GateConfig, GateVerdict, write_gate
from tavern_ledger.domain.ids import (
    content_hash,
    evidence_id_of_json,
    js_json,
    session_source_ref,
)
from tavern_ledger.domain.records import AuditEntry, EvidenceRow, claim_id
from tavern_ledger.domain.segments import MESSAGE, Segment, segments
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


PEOPLE = frozenset({"user_input", "user_correction"})
"""Source classes of a person's own words: their messages are cut into claims."""


def with_claims(message: Admitted) -> list[Admitted]:
    """A person's admitted message and its claims: the message is kept whole as evidence
    (never recalled), each claim is a row of its own that cites it (`metadata.claim.of`) and
    shares its state, gate findings and origin. Other evidence is its own single claim."""
    if not is_cut(message.row):
        return [message]
    kept, claims = cut(message.row)
    return [replace(message, row=kept), *(replace(message, row=c) for c in claims)]


def is_cut(row: EvidenceRow) -> bool:
    """A person's own message, said in a session: it is kept whole and cut into claims."""
    return row.source_class in PEOPLE and row.ingest in TRUSTED_INGESTS


def cut(message: EvidenceRow) -> tuple[EvidenceRow, list[EvidenceRow]]:
    """The message filed as `message` and the rows of its claims (same state and validity)."""
    parts = segments(message.content, correction=message.source_class == "user_correction")
    claim = {"kind": MESSAGE, "claims": len(parts)}
    kept = replace(message, metadata={**message.metadata, "claim": claim})
    return kept, [_claim_row(kept, n, part) for n, part in enumerate(parts, 1)]


def _claim_row(message: EvidenceRow, n: int, part: Segment) -> EvidenceRow:
    # A directive of a correcting message ("不对, 缩进要用四个空格") corrects how to answer: it
    # keeps the correction's authority (the rules channel drafts from such directives said
    # twice), while only a correction of a fact ends other claims.
    corrects = part.kind == "correction" or (
        part.kind == "directive" and message.source_class == "user_correction"
    )
    digest = content_hash(part.text)
    claim: dict[str, object] = {"kind": part.kind, "of": message.id, "n": n}
    if part.said != part.text:
        claim["said"] = part.said
    return replace(
        message,
        id=claim_id(message.source_ref, n, digest),
        source_class="user_correction" if corrects else "user_input",
        authority="user_correction" if corrects else "user_explicit",
        claim_domain=claim_domain(part.text) if part.kind == "directive" else "user_fact",
        content=part.text,
        content_hash=digest,
        confidence=1.0 if corrects else message.confidence,
        durability=0.9 if corrects else message.durability,
        tokens=estimate_tokens(part.text),
        supersedes=(),  # what the message replaced stays its own lineage
        metadata={"claim": claim},
    )


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
