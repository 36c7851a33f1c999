"""The ledger's records as the domain sees them: evidence rows, observations, audit entries."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tavern_ledger.domain.ids import sha256_hex
from tavern_ledger.domain.segments import HELD, UNINDEXED


@dataclass(frozen=True)
class EvidenceRow:
    """One row of `ledger.evidence` (acp.md §2.2, plus where it came from in a session log)."""

    id: str
    scope_id: str
    session_id: str
    source_class: str
    authority: str
    claim_domain: str
    content: str
    content_hash: str
    observed_at: datetime
    confidence: float = 0.5
    durability: float = 0.5
    sensitivity: str = "private"
    session_type: str = "root"
    agent_key: str = ""
    source_ref: str = "{}"
    """JSON text, byte-exact (the id derives from it)."""
    source_event_id: str | None = None
    source_label: str = ""
    ingest: str = ""
    flags: tuple[str, ...] = ()
    tokens: int = 0
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    state: str = "active"
    supersedes: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def claim_kind(self) -> str:
        """What the row is as a claim (`message`, `fact`, `question`, ...); empty for evidence
        that is not a person's words (a tool's output) or was stored before claims."""
        claim = self.metadata.get("claim")
        return str(claim.get("kind", "")) if isinstance(claim, dict) else ""

    @property
    def claim_of(self) -> str | None:
        """The evidence id of the message a claim was cut from."""
        claim = self.metadata.get("claim")
        found = claim.get("of") if isinstance(claim, dict) else None
        return str(found) if found else None

    @property
    def indexed_kind(self) -> bool:
        """Its kind has postings in the lexical index (`segments.UNINDEXED`)."""
        return self.claim_kind not in UNINDEXED

    @property
    def recallable(self) -> bool:
        """Recall may read it: not a whole message, a question or small talk."""
        return self.claim_kind not in HELD

    @property
    def valid_start(self) -> datetime:
        """Where the row's validity window opens: `valid_from`, else when it was observed."""
        return self.valid_from or self.observed_at


@dataclass(frozen=True)
class ObservationRow:
    """One row of `ledger.observation` (acp.md §2.3)."""

    id: str
    scope_id: str
    subject: str
    predicate: str
    claim_domain: str
    authority: str | None
    text: str
    evidence_ids: tuple[str, ...]
    observed_at: datetime
    supersedes: tuple[str, ...] = ()
    state: str = "active"
    flags: tuple[str, ...] = ()
    created_at: datetime | None = None


@dataclass(frozen=True)
class AuditEntry:
    """One audited operation: who, when, why, and with what data (never secret text)."""

    op: str
    scope_id: str
    actor: str
    reason: str = ""
    target_id: str | None = None
    payload: dict[str, Any] | None = None
    dedupe_key: str | None = None
    ts: datetime | None = None


def claim_id(message_source_ref: str, n: int, hash_of_content: str) -> str:
    """`ev_` + sha256(sourceRef + '|claim:' + n + '|' + contentHash)[:24]: the `n`th claim of
    the message at `sourceRef` (so a redelivery or a replay cuts the same rows)."""
    return "ev_" + sha256_hex(f"{message_source_ref}|claim:{n}|{hash_of_content}")[:24]
