"""`tavern.rpc.ledger.*`: recall, the user rights, import and export, observations and the
consolidation store (rules and expression candidates). Requests are tolerant of unknown
fields and strict on known ones."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from tavern_events.envelope import Id, UtcDatetime
from tavern_events.rpc.base import AuditEntry, RpcReply, RpcRequest

EvidenceOp = Literal["quarantine", "release", "redact", "delete", "rollback"]
CandidateEvent = Literal["promote", "reject", "rollback", "supersede"]


class Request(RpcRequest):
    """Fields every ledger request may carry: the audit's actor and reason."""

    actor: str = Field(default="user", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:@-]+$")
    reason: str = Field(default="", max_length=500)

    def rate_key(self) -> str:
        """What the request is about, for the ledger's rate limit ("" when nothing narrower
        than its caller): the ledger keys its buckets by the verified principal and this, never
        by the declared `actor`, so one caller's many sessions or scopes do not share a bucket,
        nor do different callers naming the same actor."""
        return ""


# --- requests -----------------------------------------------------------------------------------


class RecallBody(Request):
    """`recall`: budgeted context for one step of a session."""

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
    """`inspect`, `history` and the transitions: one evidence row."""

    evidence_id: str = Field(min_length=1, max_length=128)


class CorrectBody(Request):
    text: str = Field(min_length=1, max_length=8000)
    evidence_id: str | None = Field(default=None, max_length=128)
    session_id: Id | None = None
    scope_id: Id | None = None

    def rate_key(self) -> str:
        if self.session_id:
            return f"session:{self.session_id}"
        return f"scope:{self.scope_id}" if self.scope_id else ""


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
    observations: bool = False
    """Also the scope's active observations (acp_query's `includeObservations`)."""
    for_model: bool = False
    """Asked by a model's tool (`acp_query`): the read is audited as `model_query` (acp.md §10)."""


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
    scope_id: Id | None = None
    """The scope every row moves into; a user's import must name one of theirs."""


class ObservationRef(Request):
    actor: str = Field(default="user", min_length=1, max_length=64)
    reason: str = Field(default="", max_length=500)
    observation_id: Id


class ObservationListBody(Request):
    scope_id: Id
    state: Literal["active", "quarantined", "superseded", "all"] = "quarantined"
    limit: int = Field(default=50, ge=1)


class ProposedObservation(RpcRequest):
    """What one observation says: the fields of `observation.propose` but the scope and the
    time, which a `observation.propose_batch` names once for all of its observations."""

    subject: str = Field(min_length=1, max_length=200)
    predicate: str = Field(min_length=1, max_length=200)
    claim_domain: str = Field(max_length=32)
    text: str = Field(min_length=1, max_length=4000)
    evidence_ids: tuple[str, ...] = Field(default=(), max_length=200)
    authority: str | None = Field(default=None, max_length=32)


class ProposeBody(ProposedObservation, Request):
    actor: str = Field(default="consolidation", min_length=1, max_length=64)
    scope_id: Id
    observed_at: UtcDatetime | None = None

    def rate_key(self) -> str:
        return f"scope:{self.scope_id}"


MAX_PROPOSED = 100
"""Observations in one `observation.propose_batch` at most."""


class ProposeBatchBody(Request):
    """`observation.propose_batch`: a distillation's observations of one scope in one request,
    stored in one transaction; each is gated and answered as `observation.propose` would."""

    actor: str = Field(default="consolidation", min_length=1, max_length=64)
    scope_id: Id
    observations: tuple[ProposedObservation, ...] = Field(min_length=1, max_length=MAX_PROPOSED)
    observed_at: UtcDatetime | None = None

    def rate_key(self) -> str:
        return f"scope:{self.scope_id}"


MAX_JUDGED_TARGETS = 20
"""Earlier claims one `claim.supersede` may end at most."""
ClaimDecision = Literal["update", "contradict"]


class ClaimSupersedeBody(Request):
    """`claim.supersede`: the consolidator's model judged that a new claim of fact updates or
    contradicts earlier claims of the same person in its scope; the ledger ends them as a
    correction said in chat does. The consolidator's and the operator's only."""

    evidence_id: str = Field(min_length=1, max_length=128)
    supersedes: list[Annotated[str, Field(min_length=1, max_length=128)]] = Field(
        min_length=1, max_length=MAX_JUDGED_TARGETS
    )
    decision: ClaimDecision


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


# --- replies ------------------------------------------------------------------------------------


class RecalledItem(RpcReply):
    """Why an item was recalled (`explain: true`)."""

    evidence_id: str
    source_event_id: str | None = None
    session_id: str | None = None
    cross_session: bool
    source_class: str
    authority: str
    claim_domain: str
    score: float
    section: str


class RankedItem(RecalledItem):
    injected: bool


class RecallReply(RpcReply):
    """The rendered, source-labelled lines and how many items they hold; explained recalls add
    `items` (what was injected) and `ranked` (the best candidates)."""

    text: str
    count: int
    items: list[RecalledItem] | None = None
    ranked: list[RankedItem] | None = None


class Evidence(RpcReply):
    """An evidence row as replies show it (content clipped)."""

    evidence_id: str
    scope_id: str
    session_id: str | None
    state: str
    source_class: str
    authority: str
    claim_domain: str
    content: str
    content_hash: str
    observed_at: str | None
    valid_from: str | None
    valid_until: str | None


class QueryReply(RpcReply):
    items: list[Evidence]
    count: int


class AuditReply(RpcReply):
    """Audit entries, newest first: who did what to which target, when and why."""

    items: list[AuditEntry]
    count: int


class InspectReply(Evidence):
    """One evidence row with its read-gate verdict, what superseded it and its audit trail."""

    recallable: bool
    read_gate: list[str]
    superseded_by: list[str]
    audit: list[AuditEntry]


class HistoryReply(RpcReply):
    evidence_id: str
    lineage: list[Evidence]


class CorrectReply(RpcReply):
    """Whether the correction was stored (its evidence id, what it superseded); a blocked one
    names the gate's reasons and its audit entry."""

    stored: bool
    evidence_id: str | None = None
    reasons: list[str] | None = None


class ClaimSupersedeReply(RpcReply):
    """What the judgement ended now, and what it had ended before (a repeated request changes
    nothing)."""

    evidence_id: str
    superseded: list[str]
    unchanged: list[str]


class TransitionReply(RpcReply):
    evidence_id: str
    from_state: str
    to_state: str
    audit_id: int


class StatsReply(RpcReply):
    scope_id: str | None
    evidence: dict[str, Any]


class ExportReply(RpcReply):
    """JSONL lines of the asked streams and the cursor of the next page (None at the end)."""

    lines: list[str]
    cursor: str | None = None


class ImportReply(RpcReply):
    """Rows inserted per stream, lines skipped (already there), and the lines that failed."""

    inserted: dict[str, int]
    skipped: int
    errors: list[dict[str, Any]]


class ProposeReply(RpcReply):
    """Whether the observation was stored: its id, state, authority and what it superseded, or
    the gate's reasons for blocking it."""

    stored: bool


class ProposeBatchReply(RpcReply):
    """One answer per proposed observation, in order: `observation.propose`'s reply, or
    `{"error": {...}}` (the common error) for an observation refused on its own (an unknown
    claim domain, say) while the others were stored."""

    items: list[dict[str, Any]]


class Observation(RpcReply):
    """One observation as `observation.list` shows it."""

    observation_id: str
    subject: str
    predicate: str
    claim_domain: str
    authority: str
    text: str
    state: str
    flags: list[str]
    evidence_ids: list[str]
    observed_at: str


class ObservationListReply(RpcReply):
    """A scope's observations in the state asked for (the held ones by default)."""

    items: list[Observation]
    count: int


class ObservationReleaseReply(RpcReply):
    """A held observation released after review: now active, the active one of its key
    superseded (`superseded`, or None), with the audit entry that records it."""

    observation_id: str
    from_state: Literal["quarantined"]
    to_state: Literal["active"]
    superseded: str | None
    audit_id: int


class Rule(RpcReply):
    id: str
    scope_id: str
    domain: str
    title: str
    text: str
    state: str
    source: str
    gates: list[str]
    evidence_ids: list[str]
    supersedes: str | None
    pinned: bool
    updated_at: str


class RuleReply(RpcReply):
    """`rule.activate` (with `inserted` and `superseded`) and `rule.pin`: the rule stored."""

    rule: Rule
    inserted: bool | None = None
    superseded: str | None = None


class RulesReply(RpcReply):
    rules: list[Rule]


class Candidate(RpcReply):
    candidate_id: str
    scope_id: str
    domain: str
    evidence_ids: list[str]
    state: str
    policy: dict[str, Any] | None
    decision_reason: str | None
    created_at: str
    updated_at: str


class CandidateReply(RpcReply):
    """`candidate.create` (`created` false: it existed, returned as it is) and
    `candidate.transition`: the candidate as stored."""

    candidate: Candidate
    created: bool | None = None


class CandidatesReply(RpcReply):
    candidates: list[Candidate]
