"""Request bodies of `tavern.rpc.consolidator.*`: the contract's
(`tavern_events.rpc.consolidator`)."""

from __future__ import annotations

from tavern_events.rpc.consolidator import (
    ApprovalsBody,
    AuditBody,
    DistilBody,
    DreamBody,
    DreamReviewBody,
    ExplainBody,
    ExpressionDecideBody,
    ExpressionListBody,
    OptionalScopeBody,
    ProfileBody,
    Request,
    RulesDecideBody,
    ScopeBody,
)

__all__ = [
    "ApprovalsBody",
    "AuditBody",
    "DistilBody",
    "DreamBody",
    "DreamReviewBody",
    "ExplainBody",
    "ExpressionDecideBody",
    "ExpressionListBody",
    "OptionalScopeBody",
    "ProfileBody",
    "Request",
    "RulesDecideBody",
    "ScopeBody",
]
