"""The shapes of the ledger's RPC requests (tolerant of unknown fields, strict on known ones)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tavern_events.envelope import Id, UtcDatetime

EvidenceOp = Literal["quarantine", "release", "redact", "delete", "rollback"]


class Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    actor: str = Field(default="user", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:@-]+$")
    reason: str = Field(default="", max_length=500)

    def rate_key(self) -> str:
        return f"actor:{self.actor}"


class RecallBody(Request):
    session_id: Id
    query: str = Field(max_length=4000)
    turn: int = Field(default=0, ge=0)
    step: int = Field(default=0, ge=0)
    explain: bool = False
    as_of: UtcDatetime | None = None
    member: Id | None = None
    """A group chat's speaking member: its own memory (its character's, across the owner's
    chats) is recalled beside the group chat's, each labelled."""
    member_name: str | None = Field(default=None, max_length=128)

    def rate_key(self) -> str:
        return f"session:{self.session_id}"


class EvidenceRef(Request):
    evidence_id: str = Field(min_length=1, max_length=128)


class CorrectBody(Request):
    text: str = Field(min_length=1, max_length=8000)
    evidence_id: str | None = Field(default=None, max_length=128)
    session_id: Id | None = None
    scope_id: Id | None = None

    def rate_key(self) -> str:
        return f"session:{self.session_id}" if self.session_id else super().rate_key()


class QueryBody(Request):
    scope_id: Id | None = None
    session_id: Id | None = None
    state: Literal["active", "quarantined", "superseded", "redacted", "all"] = "active"
    claim_domain: str | None = Field(default=None, max_length=32)
    authority: str | None = Field(default=None, max_length=32)
    source_class: str | None = Field(default=None, max_length=32)
    text: str | None = Field(default=None, max_length=500)
    as_of: UtcDatetime | None = None
    limit: int = Field(default=50, ge=1)


class AuditBody(Request):
    op: str | None = Field(default=None, max_length=64)
    scope_id: str | None = Field(default=None, max_length=64)
    by: str | None = Field(default=None, max_length=64, description="the actor to look for")
    target_id: str | None = Field(default=None, max_length=128)
    limit: int = Field(default=50, ge=1)


class StatsBody(Request):
    scope_id: Id | None = None


class ExportBody(Request):
    scope_id: Id | None = None
    streams: tuple[Literal["evidence", "observation", "candidate", "audit"], ...] = (
        "evidence",
        "observation",
        "candidate",
        "audit",
    )
    include_non_active: bool = False
    cursor: str | None = Field(default=None, max_length=1024)
    limit: int = Field(default=500, ge=1)


class ImportBody(Request):
    jsonl: str = Field(min_length=0)


class ProposeBody(Request):
    actor: str = Field(default="consolidation", min_length=1, max_length=64)
    scope_id: Id
    subject: str = Field(min_length=1, max_length=200)
    predicate: str = Field(min_length=1, max_length=200)
    claim_domain: str = Field(max_length=32)
    text: str = Field(min_length=1, max_length=4000)
    evidence_ids: tuple[str, ...] = Field(default=(), max_length=200)
    authority: str | None = Field(default=None, max_length=32)
    observed_at: UtcDatetime | None = None
