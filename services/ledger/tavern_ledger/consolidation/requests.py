"""Request bodies of `tavern.rpc.ledger.consolidation.*` (tolerant of unknown fields)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tavern_events.envelope import Id
from tavern_ledger.requests import Request

CandidateEvent = Literal["promote", "reject", "rollback", "supersede"]


class ConsolidationRequest(Request):
    actor: str = Field(default="consolidation", min_length=1, max_length=64)


class RuleActivateBody(ConsolidationRequest):
    scope_id: Id
    domain: str = Field(min_length=1, max_length=24, pattern=r"^[a-z][a-z0-9_-]*$")
    title: str = Field(min_length=1, max_length=60)
    text: str = Field(min_length=1, max_length=200)
    gates: tuple[str, ...] = Field(default=(), max_length=8)
    evidence_ids: tuple[Id, ...] = Field(default=(), max_length=50)
    supersedes: str | None = Field(default=None, max_length=64)
    source: Literal["feedback", "consolidation", "manual"] = "feedback"


class RulePinBody(ConsolidationRequest):
    rule_id: str = Field(min_length=1, max_length=64)
    pinned: bool


class RuleListBody(ConsolidationRequest):
    scope_id: Id | None = None
    state: Literal["draft", "active", "rejected", "superseded"] | None = "active"
    limit: int = Field(default=200, ge=1)


class CandidateCreateBody(ConsolidationRequest):
    scope_id: Id
    domain: str = Field(default="style", max_length=32)
    evidence_ids: tuple[Id, ...] = Field(min_length=1, max_length=50)
    policy: dict[str, Any] | None = None
    pending: bool = Field(default=True, description="mark the evidence as pending promotion")


class CandidateTransitionBody(ConsolidationRequest):
    candidate_id: str = Field(min_length=1, max_length=64)
    event: CandidateEvent
    policy: dict[str, Any] | None = None


class CandidateListBody(ConsolidationRequest):
    scope_id: Id | None = None
    state: Literal["proposed", "promoted", "rejected", "superseded", "rolled_back"] | None = None
    domain: str | None = Field(default=None, max_length=32)
    limit: int = Field(default=200, ge=1)
