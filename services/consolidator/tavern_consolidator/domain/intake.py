"""LEDGER facts and session events -> the changes they make to the consolidator's copies.
Pure: the adapter decodes messages and applies the changes in one transaction."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from tavern_consolidator.domain.records import Evidence, Observation
from tavern_consolidator.domain.throttle import digestible
from tavern_events.envelope import SessionEvent
from tavern_events.ledger import (
    EvidenceAppended,
    EvidenceStateChanged,
    ObservationUpserted,
    RuleChanged,
)
from tavern_events.session import SessionCreated
from tavern_events.turn import TurnEnded


@dataclass(frozen=True)
class StateChange:
    evidence_id: str
    state: str
    at: datetime


@dataclass(frozen=True)
class RuleView:
    id: str
    scope_id: str
    domain: str
    title: str
    text: str
    state: str
    pinned: bool
    evidence_ids: tuple[str, ...]
    at: datetime


@dataclass(frozen=True)
class TurnEnd:
    event_id: str
    session_id: str
    turn: int
    ended_at: datetime


@dataclass
class Changes:
    """What one batch of messages changes, in stream order within each kind."""

    sessions: dict[str, str] = field(default_factory=dict)
    evidence: list[tuple[Evidence, bool]] = field(default_factory=list)
    states: list[StateChange] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    rules: list[RuleView] = field(default_factory=list)
    turns: list[TurnEnd] = field(default_factory=list)
    human_scopes: set[str] = field(default_factory=set)
    """Scopes that received human evidence (the rules channel looks at them)."""
    replacing: set[str] = field(default_factory=set)
    """Claims the ledger already used to supersede others (a correction said in chat)."""

    @property
    def evidence_scopes(self) -> set[str]:
        return {e.scope_id for e, _ in self.evidence}


HUMAN = frozenset({"user_explicit", "user_correction"})
FACTUAL = frozenset({"fact", "preference", "correction"})
"""Claims of fact: what a model may judge to update or contradict earlier ones."""
UNCLAIMED = frozenset({"message", "question", "chatter"})
"""Evidence the consolidator leaves alone: a person's whole message (its claims are copied),
and the questions and small talk in it."""


def evidence_of(fact: EvidenceAppended) -> Evidence:
    p = fact.payload
    # The batch's watermark is its latest *observed* time: facts written before `observed_at`
    # was carried fall back to the validity start, then to the time the ledger stored them.
    observed = p.observed_at or p.valid_from or fact.ts
    return Evidence(
        id=p.evidence_id,
        scope_id=fact.scope_id,
        session_id=p.origin.session_id or fact.session_id or "",
        text=p.text,
        authority=p.authority,
        claim_domain=p.claim_domain,
        observed_at=observed,
        state=p.state,
        seq=p.origin.seq,
        event_id=p.origin.event_id,
        claim_kind=p.claim_kind or "",
        claim_of=p.claim_of,
        speaker=p.source_label or "",
    )


def observation_of(fact: ObservationUpserted) -> Observation:
    p = fact.payload
    return Observation(
        id=p.observation_id,
        scope_id=fact.scope_id,
        subject=p.subject,
        predicate=p.predicate,
        claim_domain=p.claim_domain,
        authority=p.authority,
        text=p.text,
        observed_at=fact.ts,
        evidence_ids=p.evidence_ids,
        state="active" if p.state == "active" else "superseded",
        supersedes=p.supersedes,
    )


def rule_of(fact: RuleChanged) -> RuleView:
    p = fact.payload
    return RuleView(
        p.rule_id,
        fact.scope_id,
        p.domain,
        p.title,
        p.text,
        p.state,
        p.pinned,
        p.evidence_ids,
        fact.ts,
    )


def add_fact(changes: Changes, fact: object) -> None:
    """Record what one LEDGER fact changes (other fact types change nothing here)."""
    if isinstance(fact, EvidenceAppended):
        if fact.payload.claim_kind in UNCLAIMED:
            return  # distilled from its claims; questions and small talk are no memory
        e = evidence_of(fact)
        changes.evidence.append((e, digestible(e.authority, e.claim_domain, e.text)))
        if e.authority in HUMAN:
            changes.human_scopes.add(e.scope_id)
    elif isinstance(fact, EvidenceStateChanged):
        p = fact.payload
        changes.states.append(StateChange(p.evidence_id, p.to_state, fact.ts))
        if p.replaced_by:
            changes.replacing.add(p.replaced_by)
    elif isinstance(fact, ObservationUpserted):
        changes.observations.append(observation_of(fact))
    elif isinstance(fact, RuleChanged):
        changes.rules.append(rule_of(fact))


def add_event(changes: Changes, event: SessionEvent) -> None:
    """Record what one session event changes: its chat (scope), or one more ended turn."""
    if isinstance(event, SessionCreated):
        changes.sessions[event.session_id] = event.payload.chat_id
    elif isinstance(event, TurnEnded):
        changes.turns.append(TurnEnd(event.id, event.session_id, event.turn, event.ts))
