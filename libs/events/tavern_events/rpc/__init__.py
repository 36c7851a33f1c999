"""Every RPC of the contract: its subject, request model, reply model and what it does.

`tavern.rpc.<service>.<operation>`; a reply is the operation's result or the common error
(`tavern_events.replies.ErrorReply`). `tavern docs` documents each from this catalog, and a
test holds each service's registered RPCs to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from tavern_events import subjects
from tavern_events.rpc import consolidator as co
from tavern_events.rpc import ledger as le
from tavern_events.rpc import projector as pr
from tavern_events.rpc import stores as st
from tavern_events.rpc.base import PingReply, PingRequest


@dataclass(frozen=True)
class Rpc:
    """One request/reply operation of a service."""

    service: str
    operation: str
    request: type[BaseModel]
    reply: type[BaseModel]
    summary: str

    @property
    def subject(self) -> str:
        return subjects.rpc(self.service, self.operation)


def _ping(service: str) -> Rpc:
    return Rpc(service, "ping", PingRequest, PingReply, "Which service and version answered.")


def _ledger() -> tuple[Rpc, ...]:
    def r(op: str, req: type[BaseModel], rep: type[BaseModel], summary: str) -> Rpc:
        return Rpc("ledger", op, req, rep, summary)

    transitions = tuple(
        r(op, le.EvidenceRef, le.TransitionReply, f"Move one evidence row: {op}.")
        for op in ("release", "quarantine", "redact", "delete", "rollback")
    )
    return (
        _ping("ledger"),
        r("recall", le.RecallBody, le.RecallReply, "Budgeted memory context for one step."),
        r("query", le.QueryBody, le.QueryReply, "Evidence rows by scope, state and filters."),
        r("inspect", le.EvidenceRef, le.InspectReply, "One evidence row, its gate and audit."),
        r("history", le.EvidenceRef, le.HistoryReply, "The lineage of one evidence row."),
        r("correct", le.CorrectBody, le.CorrectReply, "Store a correction that supersedes."),
        *transitions,
        r("export", le.ExportBody, le.ExportReply, "A page of JSONL export lines."),
        r("import", le.ImportBody, le.ImportReply, "Import JSONL through the write gate."),
        r("stats", le.StatsBody, le.StatsReply, "Evidence counts of a scope."),
        r("audit", le.AuditBody, le.AuditReply, "Audit entries by op, scope, actor, target."),
        r("observation.propose", le.ProposeBody, le.ProposeReply, "Upsert one observation."),
        r(
            "observation.propose_batch",
            le.ProposeBatchBody,
            le.ProposeBatchReply,
            "Upsert a scope's observations in one transaction.",
        ),
        r(
            "observation.list",
            le.ObservationListBody,
            le.ObservationListReply,
            "A scope's observations, the held ones by default.",
        ),
        r(
            "observation.release",
            le.ObservationRef,
            le.ObservationReleaseReply,
            "Release a held observation after review.",
        ),
        r(
            "claim.supersede",
            le.ClaimSupersedeBody,
            le.ClaimSupersedeReply,
            "End earlier claims a model judged a new claim updates or contradicts.",
        ),
        r(
            "consolidation.rule.activate",
            le.RuleActivateBody,
            le.RuleReply,
            "Store an approved rule, superseding its predecessor.",
        ),
        r("consolidation.rule.pin", le.RulePinBody, le.RuleReply, "Pin or unpin a rule."),
        r("consolidation.rule.list", le.RuleListBody, le.RulesReply, "Rules of a scope."),
        r(
            "consolidation.candidate.create",
            le.CandidateCreateBody,
            le.CandidateReply,
            "Propose an expression candidate from evidence.",
        ),
        r(
            "consolidation.candidate.transition",
            le.CandidateTransitionBody,
            le.CandidateReply,
            "Promote, reject, roll back or supersede a candidate.",
        ),
        r(
            "consolidation.candidate.list",
            le.CandidateListBody,
            le.CandidatesReply,
            "Expression candidates of a scope.",
        ),
        *_stores(),
    )


def _stores() -> tuple[Rpc, ...]:
    def r(op: str, req: type[BaseModel], rep: type[BaseModel], summary: str) -> Rpc:
        return Rpc("ledger", op, req, rep, summary)

    return (
        r("memory.search", st.MemorySearch, st.MemorySearchReply, "Search the session's memory."),
        r("memory.read", st.MemoryRead, st.MemoryReadReply, "Read one memory record."),
        r("memory.write", st.MemoryWrite, st.MemoryChangeReply, "Write a memory (gated)."),
        r("memory.update", st.MemoryUpdate, st.MemoryChangeReply, "Update with a revision."),
        r("memory.forget", st.MemoryForget, st.MemoryForgetReply, "Soft-forget a memory."),
        r("variable.get", st.VariableGet, st.VariableReply, "Read one variable."),
        r("variable.set", st.VariableSet, st.VariableReply, "Set one variable (CAS)."),
        r("variable.patch", st.VariablePatch, st.VariablePatchReply, "Change a scope (CAS)."),
        r("variable.delete", st.VariableDelete, st.VariableDeleteReply, "Delete a variable."),
        r("variable.list", st.VariableList, st.VariableListReply, "List a scope's variables."),
    )


def _projector() -> tuple[Rpc, ...]:
    def r(op: str, req: type[BaseModel], rep: type[BaseModel], summary: str) -> Rpc:
        return Rpc("projector", op, req, rep, summary)

    return (
        _ping("projector"),
        r("status", pr.StatusRequest, pr.StatusReply, "Per projection: version, checkpoint, lag."),
        r("history.search", pr.HistoryRequest, pr.HistoryReply, "Search chat history."),
        r("character.get", pr.CharacterRequest, pr.CharacterReply, "Fields of a character."),
        r("lore.search", pr.LoreRequest, pr.LoreReply, "Lorebook keyword activation."),
        r("scene.get", pr.SceneRequest, pr.SceneReply, "The scene of a session."),
        r("sessions.list", pr.SessionsRequest, pr.SessionsReply, "Most recent sessions."),
        r(
            "replay.start",
            pr.ReplayStartRequest,
            pr.ReplayReply,
            "Rebuild a projection in the background (operator).",
        ),
        r("replay.status", pr.ReplayStatusRequest, pr.ReplayReply, "A replay job's progress."),
    )


def _consolidator() -> tuple[Rpc, ...]:
    def r(op: str, req: type[BaseModel], rep: type[BaseModel], summary: str) -> Rpc:
        return Rpc("consolidator", op, req, rep, summary)

    return (
        _ping("consolidator"),
        r("status", co.ScopeBody, co.StatusReply, "A scope's consolidation state."),
        r("distil", co.DistilBody, co.DistilReply, "Run distillation for a scope now."),
        r("explain", co.ExplainBody, co.ExplainReply, "What an evidence row supports."),
        r("profile.get", co.ProfileBody, co.ProfileReply, "A scope's profile."),
        r("dream.run", co.DreamBody, co.DreamRunReply, "Offline dreaming, dry run or applied."),
        r("dream.review", co.DreamReviewBody, co.DreamReviewReply, "Review dreaming's pool."),
        r("rules.list", co.ScopeBody, co.ListedRules, "Rules and drafts of a scope."),
        r("rules.decide", co.RulesDecideBody, co.RulesDecideReply, "Accept, reject, pin a rule."),
        r("rules.draft", co.ScopeBody, co.RulesDraftReply, "Draft rules from feedback now."),
        r("rules.rebuild", co.OptionalScopeBody, co.RulesRebuildReply, "Rebuild rule views."),
        r("approvals.next", co.ApprovalsBody, co.ApprovalsReply, "Approvals to surface."),
        r(
            "expression.list",
            co.ExpressionListBody,
            co.ExpressionListReply,
            "Expression candidates.",
        ),
        r(
            "expression.decide",
            co.ExpressionDecideBody,
            co.ExpressionDecideReply,
            "Approve, reject or roll back one expression candidate.",
        ),
        r("audit", co.AuditBody, co.AuditReply, "The consolidator's audit entries."),
    )


SERVICES: tuple[str, ...] = ("loop", "ledger", "projector", "consolidator")
ALL: tuple[Rpc, ...] = (_ping("loop"), *_ledger(), *_projector(), *_consolidator())
BY_SUBJECT: dict[str, Rpc] = {r.subject: r for r in ALL}


def of_service(service: str) -> tuple[Rpc, ...]:
    return tuple(r for r in ALL if r.service == service)
