"""Request bodies of `tavern.rpc.ledger.consolidation.*`: the contract's
(`tavern_events.rpc.ledger`)."""

from __future__ import annotations

from tavern_events.rpc.ledger import (
    CandidateCreateBody,
    CandidateEvent,
    CandidateListBody,
    CandidateTransitionBody,
    ConsolidationRequest,
    RuleActivateBody,
    RuleListBody,
    RulePinBody,
)

__all__ = [
    "CandidateCreateBody",
    "CandidateEvent",
    "CandidateListBody",
    "CandidateTransitionBody",
    "ConsolidationRequest",
    "RuleActivateBody",
    "RuleListBody",
    "RulePinBody",
]
