"""Facts the ledger committed (LEDGER stream): evidence, observations, memories, variables, rules.

The envelope's `scope_id` is the scope the fact belongs to (a chat, character or agent id, or
`global`). Revisions are opaque tokens: compare them, never parse them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, model_validator

from tavern_events.envelope import Id, LedgerFact, Model, Payload, UtcDatetime
from tavern_events.parts import CallId, Sha256Hex, Token

EvidenceState = Literal["active", "quarantined", "superseded", "redacted"]
ObservationState = Literal["active", "superseded", "retracted"]
MemoryScope = Literal["chat", "character", "agent", "global"]
VariableScope = Literal["turn", "chat", "character", "agent", "global"]
RuleState = Literal["draft", "active", "rejected", "retired"]

Revision = Annotated[str, Field(min_length=1, max_length=64)]
VariableName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")]


class EvidenceOrigin(Model):
    """Where a piece of evidence came from in a session log."""

    session_id: Id | None = None
    seq: int | None = Field(default=None, ge=1)
    event_id: Id | None = None
    call_id: CallId | None = None


ClaimKind = Literal[
    "message", "fact", "preference", "directive", "question", "chatter", "correction"
]


class EvidenceAppendedPayload(Payload):
    evidence_id: Id
    content_hash: Sha256Hex
    text: str
    authority: Token
    claim_domain: Token
    state: EvidenceState
    ingest: Token
    """The ingest path (`session-event`, `user-correction`...); unknown paths are quarantined."""
    origin: EvidenceOrigin = EvidenceOrigin()
    flags: tuple[Token, ...] = ()
    """Write-gate findings (`secret`, `pii`, `injection`) behind a quarantine or redaction."""
    valid_from: UtcDatetime | None = None
    valid_to: UtcDatetime | None = None
    observed_at: UtcDatetime | None = None
    """When the evidence was said or returned (its session event's time), not when the ledger
    stored it; absent in facts written before it was carried."""
    claim_kind: ClaimKind | None = None
    """What the row is as a claim: `message` (a person's whole message, kept as evidence and
    never recalled), or one claim cut from it (`fact`, `preference`, `directive`, `question`,
    `chatter`, `correction`); absent for evidence that is not a person's words, and in facts
    written before claims."""
    claim_of: Id | None = None
    """The evidence id of the message a claim was cut from."""
    source_label: str | None = Field(default=None, max_length=128)
    """Who said it (`user`, or `user:<name>` in a chat of several people); absent for evidence
    that is not a person's words, and in facts written before it was carried."""


class EvidenceAppended(LedgerFact):
    """New evidence passed the write gate (idempotent by content hash)."""

    type: Literal["evidence/appended"] = "evidence/appended"
    payload: EvidenceAppendedPayload


class EvidenceStateChangedPayload(Payload):
    evidence_id: Id
    from_state: EvidenceState
    to_state: EvidenceState
    reason: str = Field(max_length=500)
    audit_id: Id | None = None
    replaced_by: Id | None = None
    """A supersession's: the evidence that replaced this one (a correction's claim)."""

    @model_validator(mode="after")
    def _changed(self) -> EvidenceStateChangedPayload:
        if self.from_state == self.to_state:
            raise ValueError("a state change must change the state")
        return self


class EvidenceStateChanged(LedgerFact):
    """An audited transition: quarantine, release, supersede, redact."""

    type: Literal["evidence/state-changed"] = "evidence/state-changed"
    payload: EvidenceStateChangedPayload


class ObservationUpsertedPayload(Payload):
    observation_id: Id
    subject: str = Field(min_length=1, max_length=200)
    predicate: str = Field(min_length=1, max_length=200)
    text: str
    claim_domain: Token
    authority: Token
    """The weakest authority among the supporting evidence."""
    evidence_ids: tuple[Id, ...] = ()
    state: ObservationState = "active"
    supersedes: Id | None = None
    confidence: float = Field(default=1.0, ge=0, le=1)
    revision: Revision


class ObservationUpserted(LedgerFact):
    """The consolidator's distilled observation was created or replaced."""

    type: Literal["observation/upserted"] = "observation/upserted"
    payload: ObservationUpsertedPayload


class MemoryChangedPayload(Payload):
    memory_id: Id
    scope: MemoryScope
    op: Literal["written", "updated", "forgotten"]
    kind: Literal["semantic", "episodic"] = "semantic"
    content: str | None = None
    tags: tuple[str, ...] = ()
    revision: Revision
    previous_revision: Revision | None = None
    state: Literal["active", "quarantined", "forgotten"] = "active"
    """A quarantined memory (the write gate's verdict) is kept but never searched or recalled."""


class MemoryChanged(LedgerFact):
    """A memory record was written, updated or (softly) forgotten."""

    type: Literal["memory/changed"] = "memory/changed"
    payload: MemoryChangedPayload


class VariableChangedPayload(Payload):
    scope: VariableScope
    name: VariableName
    op: Literal["set", "deleted"]
    value: JsonValue = None
    revision: Revision | None = None
    previous_revision: Revision | None = None

    @model_validator(mode="after")
    def _consistent(self) -> VariableChangedPayload:
        if self.op == "set" and self.revision is None:
            raise ValueError("a set variable has a revision")
        return self


class VariableChanged(LedgerFact):
    """A variable was set or deleted (one event per variable, also inside a patch)."""

    type: Literal["variable/changed"] = "variable/changed"
    payload: VariableChangedPayload


class RuleChangedPayload(Payload):
    rule_id: Id
    state: RuleState
    domain: Token
    title: str = Field(max_length=200)
    text: str = Field(max_length=4000)
    pinned: bool = False
    evidence_ids: tuple[Id, ...] = ()
    revision: Revision


class RuleChanged(LedgerFact):
    """A feedback-channel rule was drafted, accepted, rejected, retired or pinned."""

    type: Literal["rule/changed"] = "rule/changed"
    payload: RuleChangedPayload
