"""The memory index: evidence and memory records as the LEDGER stream reports them.

Only active content is searchable. A redaction blanks the evidence here and names the session
message it came from, so every other projection can remove that content too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tavern_events.ledger import EvidenceAppended, EvidenceStateChanged, MemoryChanged
from tavern_projector.domain import text

SEARCHABLE_EVIDENCE = ("active",)


@dataclass(frozen=True)
class EvidenceRow:
    evidence_id: str
    scope_id: str
    text: str
    state: str
    authority: str
    claim_domain: str
    session_id: str | None
    seq: int | None
    event_id: str | None
    updated_at: datetime

    @property
    def tokens(self) -> list[str]:
        return text.index_tokens(self.text) if self.state in SEARCHABLE_EVIDENCE else []


@dataclass(frozen=True)
class MemoryRow:
    memory_id: str
    scope: str
    scope_id: str
    kind: str
    content: str | None
    tags: tuple[str, ...]
    revision: str
    state: str
    updated_at: datetime

    @property
    def tokens(self) -> list[str]:
        if self.content is None:
            return []
        return text.index_tokens(" ".join([self.content, *self.tags]))


@dataclass(frozen=True)
class StateChange:
    evidence_id: str
    to_state: str
    reason: str
    at: datetime

    @property
    def redacts(self) -> bool:
        return self.to_state == "redacted"


Change = EvidenceRow | MemoryRow | StateChange


def change_of(fact: object) -> Change | None:
    """What one ledger fact changes in the index (None: nothing)."""
    if isinstance(fact, EvidenceAppended):
        return evidence_row(fact)
    if isinstance(fact, EvidenceStateChanged):
        p = fact.payload
        return StateChange(p.evidence_id, p.to_state, p.reason, fact.ts)
    if isinstance(fact, MemoryChanged):
        return memory_row(fact)
    return None


def evidence_row(fact: EvidenceAppended) -> EvidenceRow:
    p = fact.payload
    kept = "" if p.state == "redacted" else p.text
    origin = p.origin
    return EvidenceRow(
        p.evidence_id,
        fact.scope_id,
        kept,
        p.state,
        p.authority,
        p.claim_domain,
        origin.session_id,
        origin.seq,
        origin.event_id,
        fact.ts,
    )


def memory_row(fact: MemoryChanged) -> MemoryRow:
    p = fact.payload
    forgotten = p.op == "forgotten"
    return MemoryRow(
        p.memory_id,
        p.scope,
        fact.scope_id,
        p.kind,
        None if forgotten else p.content,
        () if forgotten else p.tags,
        p.revision,
        "forgotten" if forgotten else "active",
        fact.ts,
    )
