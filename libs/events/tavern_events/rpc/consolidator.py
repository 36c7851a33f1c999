"""`tavern.rpc.consolidator.*`: distillation, dreaming, rules, expression approvals, profiles
and the consolidator's audit. Requests are tolerant of unknown fields."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tavern_events.envelope import Id
from tavern_events.rpc.base import AuditEntry, RpcReply, RpcRequest


class Request(RpcRequest):
    actor: str = Field(default="user", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:@-]+$")


# --- requests -----------------------------------------------------------------------------------


class ScopeBody(Request):
    scope_id: Id


class OptionalScopeBody(Request):
    scope_id: Id | None = None


class DistilBody(Request):
    scope_id: Id
    force: bool = True


class ExplainBody(Request):
    evidence_id: str = Field(min_length=1, max_length=128)


class ProfileBody(Request):
    scope_id: Id | None = None
    session_id: Id | None = None


class DreamBody(Request):
    scope_id: Id | None = None
    apply: bool = False


class DreamReviewBody(Request):
    op: Literal["list", "approve", "reject"] = "list"
    ids: tuple[str, ...] = Field(default=(), max_length=500)
    scope_id: Id | None = None
    domain: str | None = Field(default=None, max_length=32)


class RulesDecideBody(Request):
    scope_id: Id
    op: Literal["accept", "reject", "pin", "unpin"]
    ref: str = Field(min_length=1, max_length=64, description="1-based index or id")


class ApprovalsBody(Request):
    session_id: Id


class ExpressionListBody(Request):
    scope_id: Id | None = None
    pending: bool = False


class ExpressionDecideBody(Request):
    candidate_id: str = Field(min_length=1, max_length=64)
    decision: Literal["approve", "reject", "rollback"]


class AuditBody(Request):
    scope_id: Id | None = None
    op: str | None = Field(default=None, max_length=64)
    limit: int = Field(default=50, ge=1, le=500)


# --- replies ------------------------------------------------------------------------------------


class StatusReply(RpcReply):
    """A scope's consolidation state: what waits for distillation, and the last batches."""

    scope_id: str
    undigested: int
    turns: int


class DistilReply(RpcReply):
    """Whether a batch ran (else `reason`: locked, retry_wait, below the throttle...), and
    what it digested and proposed."""

    ran: bool
    reason: str | None = None
    digested: int | None = None
    observations: int | None = None


class ExplainReply(RpcReply):
    """Whether an evidence row was digested, is pending or was skipped, and its batches."""

    evidence_id: str
    verdict: str
    batches: list[dict[str, Any]]


class ProfileReply(RpcReply):
    """The scope's profile: arrays of observation refs by section, and recall candidates."""

    subject_id: str | None
    source_version: Any = None
    candidates: list[dict[str, Any]]


class DreamRunReply(RpcReply):
    dry_run: bool
    scopes: list[dict[str, Any]]


class DreamReviewReply(RpcReply):
    """`op: list` answers `candidates`; approve and reject answer `decided` and `missing`."""

    candidates: list[dict[str, Any]] | None = None
    decided: list[str] | None = None
    missing: list[str] | None = None


class ListedRules(RpcReply):
    scope_id: str
    drafts: list[dict[str, Any]]
    active: list[dict[str, Any]]


class RulesDecideReply(RpcReply):
    """accept: the rule the ledger stored (`rule`); reject: `rejected`; pin and unpin: the
    ledger's answer."""

    rule: dict[str, Any] | None = None
    rejected: str | None = None


class RulesDraftReply(RpcReply):
    ran: bool
    reason: str | None = None
    candidates: int | None = None
    drafted: int | None = None
    covered: int | None = None


class RulesRebuildReply(RpcReply):
    rules: int
    files: Any = None


class ApprovalRequest(RpcReply):
    candidate_id: str
    tool_name: str
    reason: str
    policy_reason: Any = None


class ApprovalsReply(RpcReply):
    """The expression approvals to surface at the session's next step (each once)."""

    scope_id: str | None
    requests: list[ApprovalRequest]


class ExpressionListReply(RpcReply):
    candidates: list[dict[str, Any]]


class ExpressionDecideReply(RpcReply):
    candidate: dict[str, Any]


class AuditReply(RpcReply):
    entries: list[AuditEntry]
