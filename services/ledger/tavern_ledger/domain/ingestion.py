"""One ordered batch of session events -> what to write: evidence rows, refusals to audit, the
sessions learned, and the checkpoint. Pure; ids are content-derived, so planning the same events
again (a redelivery, a replay) plans the same rows, which the store then inserts once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tavern_events.envelope import SessionEvent
from tavern_events.session import SessionCreated
from tavern_ledger.domain.admission import Admitted, Refused, admit_draft, with_claims
from tavern_ledger.domain.extract import (
    ExtractConfig,
    SessionFacts,
    Skip,
    extract,
    session_facts_of,
)
from tavern_ledger.domain.gates import GateConfig


@dataclass(frozen=True)
class Incoming:
    """A decoded session event and its SESSIONS stream sequence."""

    stream_seq: int
    event: SessionEvent


@dataclass
class BatchPlan:
    admitted: list[Admitted] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    sessions: dict[str, SessionFacts] = field(default_factory=dict)
    """Sessions whose `session/created` this batch carried (to upsert)."""
    skipped: Counter[str] = field(default_factory=Counter)
    last_stream_seq: int = 0


def evidence_scope(session: SessionFacts) -> str:
    """The scope evidence of a session lives in: what its binding's memory reach says (its
    chat, its character's or its agent's), else its chat."""
    return session.scope


def plan_batch(
    incoming: Sequence[Incoming],
    known: Mapping[str, SessionFacts],
    gate: GateConfig,
    config: ExtractConfig = ExtractConfig(),
) -> BatchPlan:
    """Decide every event of the batch in stream order."""
    return BatchPlanner(known, gate, config).plan(incoming)


class BatchPlanner:
    """Plans a batch part by part, in stream order: the sessions learned and the events planned
    carry over from part to part, so the parts plan what `plan_batch` plans in one go."""

    def __init__(
        self,
        known: Mapping[str, SessionFacts],
        gate: GateConfig,
        config: ExtractConfig = ExtractConfig(),
    ) -> None:
        self._sessions = dict(known)
        self._seen: set[str] = set()
        self._gate, self._config = gate, config

    def plan(self, incoming: Sequence[Incoming]) -> BatchPlan:
        """The plan of the next part of the batch."""
        plan = BatchPlan()
        for item in incoming:
            plan.last_stream_seq = max(plan.last_stream_seq, item.stream_seq)
            event = item.event
            if isinstance(event, SessionCreated):
                facts = session_facts_of(event)
                self._sessions[event.session_id] = plan.sessions[event.session_id] = facts
                continue
            session = self._sessions.get(event.session_id) or SessionFacts.unknown(event.session_id)
            _decide(plan, event, session, self._gate, self._config, self._seen)
        return plan


def _decide(
    plan: BatchPlan,
    event: SessionEvent,
    session: SessionFacts,
    gate: GateConfig,
    config: ExtractConfig,
    seen: set[str],
) -> None:
    draft = extract(event, session, config)
    if isinstance(draft, Skip):
        plan.skipped[draft.reason.partition(":")[0]] += 1
        return
    outcome = admit_draft(draft, evidence_scope(session), gate)
    key = outcome.row.id if isinstance(outcome, Admitted) else outcome.audit.dedupe_key or ""
    if key in seen:  # the same event twice in one batch
        plan.skipped["duplicate"] += 1
        return
    seen.add(key)
    if isinstance(outcome, Admitted):
        plan.admitted.extend(with_claims(outcome))
    else:
        plan.refused.append(outcome)
