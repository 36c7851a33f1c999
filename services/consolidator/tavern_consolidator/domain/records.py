"""What the consolidator knows of the ledger, as copied from LEDGER facts."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Evidence:
    """A copy of one evidence row (from `evidence/appended` and its state changes)."""

    id: str
    scope_id: str
    session_id: str
    text: str
    authority: str
    claim_domain: str
    observed_at: datetime
    state: str = "active"
    seq: int | None = None
    event_id: str | None = None
    state_changed_at: datetime | None = None
    claim_kind: str = ""
    """What it is as a claim cut from a person's message (`fact`, ...); empty otherwise."""
    claim_of: str | None = None
    speaker: str = ""


@dataclass(frozen=True)
class Observation:
    """A copy of one observation the ledger stored (from `observation/upserted`)."""

    id: str
    scope_id: str
    subject: str
    predicate: str
    claim_domain: str
    authority: str
    text: str
    observed_at: datetime
    evidence_ids: tuple[str, ...] = ()
    state: str = "active"
    supersedes: str | None = None


@dataclass(frozen=True)
class Proposed:
    """An observation the consolidator proposes to the ledger (the ledger derives the rest)."""

    subject: str
    predicate: str
    claim_domain: str
    text: str
    evidence_ids: tuple[str, ...] = field(default=())

    def as_json(self) -> dict[str, object]:
        return {
            "subject": self.subject,
            "predicate": self.predicate,
            "claimDomain": self.claim_domain,
            "text": self.text,
            "evidenceIds": list(self.evidence_ids),
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Proposed:
        ids = data.get("evidenceIds") or []
        return cls(
            str(data["subject"]),
            str(data["predicate"]),
            str(data["claimDomain"]),
            str(data["text"]),
            tuple(str(i) for i in ids) if isinstance(ids, list) else (),
        )
