"""RPCs the consolidator calls to have the ledger store rules and expression candidates:
`tavern.rpc.ledger.consolidation.<op>`. Thin: parse, authorize, call one use case, flush the
facts. Changes are the consolidator's and the operator's; a user may list their own scope's."""

from __future__ import annotations

from typing import Any

from faststream.nats import NatsBroker

from tavern_events import subjects
from tavern_ledger.changes import Actor
from tavern_ledger.consolidation.candidates import Candidates, Proposal
from tavern_ledger.consolidation.requests import (
    CandidateCreateBody,
    CandidateListBody,
    CandidateTransitionBody,
    RuleActivateBody,
    RuleListBody,
    RulePinBody,
)
from tavern_ledger.consolidation.rules import Activation, Rules
from tavern_ledger.handlers.rpc import Reply, serve
from tavern_ledger.ledger import LEDGER_KEY, SERVICE, Ledger
from tavern_runtime.context import Context, Message
from tavern_runtime.principals import Principal

PREFIX = "consolidation"
RPC_QUEUE = f"{SERVICE}-rpc"


def _actor(body: Any, who: Principal) -> Actor:
    return Actor(body.actor if who.user is None else who.label, body.reason)


async def _curator(ledger: Ledger, who: Principal, op: str) -> None:
    """Rules and candidates change by the consolidator (a service) or the operator."""
    await ledger.access.curator(who, op)


async def _listing(ledger: Ledger, who: Principal, op: str, scope_id: str | None) -> None:
    if scope_id is None:  # every scope's: the consolidator's (its rule views) or the operator's
        await ledger.access.curator(who, op)
    else:
        await ledger.access.scope(who, scope_id, op)


async def rule_activate(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: RuleActivateBody, who: Principal) -> Reply:
        await _curator(ledger, who, "consolidation.rule.activate")
        activation = Activation(
            r.scope_id, r.domain, r.title, r.text, r.gates, r.evidence_ids, r.supersedes, r.source
        )
        reply = await Rules(ledger.pool).activate(activation, _actor(r, who))
        await ledger.relay.flush()
        return reply

    return await serve(ledger, "consolidation.rule.activate", msg, RuleActivateBody, handle)


async def rule_pin(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: RulePinBody, who: Principal) -> Reply:
        await _curator(ledger, who, "consolidation.rule.pin")
        reply = await Rules(ledger.pool).pin(r.rule_id, r.pinned, _actor(r, who))
        await ledger.relay.flush()
        return reply

    return await serve(ledger, "consolidation.rule.pin", msg, RulePinBody, handle)


async def rule_list(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: RuleListBody, who: Principal) -> Reply:
        await _listing(ledger, who, "consolidation.rule.list", r.scope_id)
        limit = min(r.limit, ledger.caps.max_results)
        return await Rules(ledger.pool).listing(r.scope_id, r.state, limit)

    return await serve(ledger, "consolidation.rule.list", msg, RuleListBody, handle)


async def candidate_create(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: CandidateCreateBody, who: Principal) -> Reply:
        await _curator(ledger, who, "consolidation.candidate.create")
        proposal = Proposal(r.scope_id, r.domain, r.evidence_ids, r.policy, r.pending)
        return await Candidates(ledger.pool).create(proposal, _actor(r, who))

    op = "consolidation.candidate.create"
    return await serve(ledger, op, msg, CandidateCreateBody, handle)


async def candidate_transition(
    body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)
) -> Reply:
    async def handle(r: CandidateTransitionBody, who: Principal) -> Reply:
        await _curator(ledger, who, "consolidation.candidate.transition")
        return await Candidates(ledger.pool).transition(
            r.candidate_id, r.event, _actor(r, who), r.policy
        )

    op = "consolidation.candidate.transition"
    return await serve(ledger, op, msg, CandidateTransitionBody, handle)


async def candidate_list(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: CandidateListBody, who: Principal) -> Reply:
        await _listing(ledger, who, "consolidation.candidate.list", r.scope_id)
        limit = min(r.limit, ledger.caps.max_results)
        return await Candidates(ledger.pool).listing(r.scope_id, r.state, r.domain, limit)

    return await serve(ledger, "consolidation.candidate.list", msg, CandidateListBody, handle)


RPCS: dict[str, Any] = {
    "rule.activate": rule_activate,
    "rule.pin": rule_pin,
    "rule.list": rule_list,
    "candidate.create": candidate_create,
    "candidate.transition": candidate_transition,
    "candidate.list": candidate_list,
}
"""`tavern.rpc.ledger.consolidation.<op>` -> handler."""


def register(broker: NatsBroker) -> None:
    """Bind the consolidation RPCs (one queue group across ledger replicas)."""
    for op, handler in RPCS.items():
        subject = subjects.rpc(SERVICE, f"{PREFIX}.{op}")
        broker.subscriber(subject, queue=RPC_QUEUE)(handler)
