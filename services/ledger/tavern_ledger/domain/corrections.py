"""A user's correction as evidence: a `user_correction` row that supersedes its target, the two
validity windows meeting at the moment of the correction (so "as of" before it shows the old)."""

from __future__ import annotations

from datetime import datetime

from tavern_ledger.domain.gates import GateVerdict
from tavern_ledger.domain.ids import content_hash, evidence_id, js_json
from tavern_ledger.domain.records import EvidenceRow
from tavern_ledger.domain.text import estimate_tokens

CORRECTION_INGEST = "user-correction"


def source_ref(target: EvidenceRow | None, session_id: str) -> dict[str, str]:
    """What a correction refers to: its target, else the session it was made in."""
    if target is not None:
        return {"correctionOf": target.id}
    return {"sessionId": session_id} if session_id else {}


def correction_row(
    verdict: GateVerdict,
    *,
    target: EvidenceRow | None,
    scope_id: str,
    session_id: str,
    claim_domain: str,
    now: datetime,
) -> EvidenceRow:
    """The new evidence; it supersedes an active target unless the gate quarantined it."""
    ref = source_ref(target, session_id)
    digest = content_hash(verdict.text)
    quarantined = verdict.action == "quarantine"
    replaces = target is not None and not quarantined
    return EvidenceRow(
        id=evidence_id(ref, digest),
        scope_id=scope_id,
        session_id=session_id,
        source_class="user_correction",
        authority="user_correction",
        claim_domain=claim_domain,
        content=verdict.text,
        content_hash=digest,
        observed_at=now,
        confidence=1.0,
        durability=0.9,
        source_ref=js_json(ref),
        source_label="user",
        ingest=CORRECTION_INGEST,
        flags=verdict.flags,
        tokens=estimate_tokens(verdict.text),
        valid_from=now if replaces else None,
        state="quarantined" if quarantined else "active",
        supersedes=(target.id,) if replaces and target is not None else (),
    )
