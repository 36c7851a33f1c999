"""The ledger's records as the domain sees them: evidence rows, observations, audit entries."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


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
