"""`tavern.rpc.consolidator.*`: distillation, dreaming, rules, expression approvals, profiles
and the consolidator's audit. Requests are tolerant of unknown fields."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tavern_events.envelope import Id
from tavern_events.rpc.base import RpcReply, RpcRequest


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
    """A scope's consolidation state: watermark, pending work, last batch."""


class DistilReply(RpcReply):
    """What one distillation batch did (observations proposed, watermark reached)."""


class ExplainReply(RpcReply):
    """Which observations an evidence row supports, and why."""


class ProfileReply(RpcReply):
    """The scope's profile built from its active observations."""


class DreamReply(RpcReply):
    """`dream.run` and `dream.review`: merges, recurrences, the cold list and the candidate
    pool behind the human gate."""


class RulesReply(RpcReply):
    """`rules.list`, `rules.decide`, `rules.draft` and `rules.rebuild`: the rules channel."""


class ApprovalsReply(RpcReply):
    """The next expression approvals to surface in a session."""


class ExpressionReply(RpcReply):
    """`expression.list` and `expression.decide`: expression candidates and decisions."""


class AuditReply(RpcReply):
    entries: list[dict[str, Any]]
