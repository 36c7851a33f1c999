"""The shapes of the ledger's RPC requests: the contract's (`tavern_events.rpc.ledger`)."""

from __future__ import annotations

from tavern_events.rpc.ledger import (
    AuditBody,
    ClaimSupersedeBody,
    CorrectBody,
    EvidenceOp,
    EvidenceRef,
    ExportBody,
    ImportBody,
    ObservationListBody,
    ObservationRef,
    ProposeBatchBody,
    ProposeBody,
    ProposedObservation,
    QueryBody,
    RecallBody,
    Request,
    StatsBody,
)

__all__ = [
    "AuditBody",
    "ClaimSupersedeBody",
    "CorrectBody",
    "EvidenceOp",
    "EvidenceRef",
    "ExportBody",
    "ImportBody",
    "ObservationListBody",
    "ObservationRef",
    "ProposeBatchBody",
    "ProposeBody",
    "ProposedObservation",
    "QueryBody",
    "RecallBody",
    "Request",
    "StatsBody",
]
