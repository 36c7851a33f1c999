"""RPC handlers of recall and the user rights: each parses its request, authorizes its
principal against what it names (`tavern_ledger.access`), calls one use case and flushes the
LEDGER facts the change committed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tavern_ledger.changes import Actor
from tavern_ledger.domain.observations import Proposal
from tavern_ledger.errors import RequestInvalid
from tavern_ledger.evidence.rows import EvidenceFilter
from tavern_ledger.handlers.rpc import Reply, serve
from tavern_ledger.ledger import LEDGER_KEY, Ledger
from tavern_ledger.recall.recaller import RecallRequest
from tavern_ledger.requests import (
    AuditBody,
    CorrectBody,
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
    StatsBody,
)
from tavern_ledger.rights import Correction, ModelQuery
from tavern_ledger.transfer import ExportRequest, ImportRequest
from tavern_runtime.context import Context, Message
from tavern_runtime.principals import Principal


def _actor(body: Any, principal: Principal) -> Actor:
    """The audit's actor: the name the operator or a service on its own account gives, else
    the principal itself (a user cannot sign the trail with another name)."""
    name = body.actor if principal.user is None else principal.label
    return Actor(name, body.reason)


async def recall(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: RecallBody, who: Principal) -> Reply:
        await ledger.access.session(who, r.session_id, "recall")
        owner = await ledger.access.owner_of(r.session_id) if r.member else None
        request = RecallRequest(
            r.session_id,
            r.query[: ledger.caps.max_query_chars],
            r.turn,
            r.step,
            r.explain,
            r.as_of,
            r.member,
            r.member_name,
            owner,
        )
        return await ledger.recaller.recall(request)

    # The composer's token budget bounds the reply.
    return await serve(ledger, "recall", msg, RecallBody, handle, bounded=False)


async def query(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: QueryBody, who: Principal) -> Reply:
        await _scoped(ledger, who, "query", r.scope_id, r.session_id)
        states = () if r.state == "all" else (r.state,)
        f = EvidenceFilter(
            r.scope_id,
            r.session_id,
            states,
            r.claim_domain,
            r.authority,
            r.source_class,
            r.text,
            r.as_of,
            min(r.limit, ledger.caps.max_results),
        )
        if not (r.observations or r.for_model):
            return await ledger.rights.query(f)
        ask = ModelQuery(r.observations, r.for_model, r.text or "", r.state)
        return await ledger.rights.query(f, ask)

    return await serve(ledger, "query", msg, QueryBody, handle)


async def inspect(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: EvidenceRef, who: Principal) -> Reply:
        await ledger.access.evidence(who, r.evidence_id, "inspect")
        return await ledger.rights.inspect(r.evidence_id)

    return await serve(ledger, "inspect", msg, EvidenceRef, handle)


async def history(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: EvidenceRef, who: Principal) -> Reply:
        await ledger.access.evidence(who, r.evidence_id, "history")
        return await ledger.rights.history(r.evidence_id)

    return await serve(ledger, "history", msg, EvidenceRef, handle)


async def correct(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: CorrectBody, who: Principal) -> Reply:
        if not (r.evidence_id or r.session_id or r.scope_id):
            raise RequestInvalid("a correction names evidence_id, session_id or scope_id")
        if r.evidence_id:
            await ledger.access.evidence(who, r.evidence_id, "correct")
        await _named(ledger, who, "correct", r.scope_id, r.session_id)
        c = Correction(r.text, r.evidence_id, r.session_id or "", r.scope_id)
        reply = await ledger.rights.correct(c, _actor(r, who))
        await ledger.relay.flush()
        return reply

    return await serve(ledger, "correct", msg, CorrectBody, handle)


def transition(op: str) -> Any:
    """The handler of one evidence transition (quarantine, release, redact, delete, rollback)."""

    async def handler(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
        async def handle(r: EvidenceRef, who: Principal) -> Reply:
            await ledger.access.evidence(who, r.evidence_id, op)
            reply = await ledger.rights.transition(r.evidence_id, op, _actor(r, who))
            await ledger.relay.flush()
            return reply

        return await serve(ledger, op, msg, EvidenceRef, handle)

    handler.__name__ = op
    return handler


async def stats(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: StatsBody, who: Principal) -> Reply:
        await _scoped(ledger, who, "stats", r.scope_id, None)
        return await ledger.rights.stats(r.scope_id)

    return await serve(ledger, "stats", msg, StatsBody, handle)


async def audit(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: AuditBody, who: Principal) -> Reply:
        await _scoped(ledger, who, "audit", r.scope_id, None)
        limit = min(r.limit, ledger.caps.max_results)
        return await ledger.rights.audit(
            op=r.op, scope_id=r.scope_id, actor=r.by, target_id=r.target_id, limit=limit
        )

    return await serve(ledger, "audit", msg, AuditBody, handle)


async def export(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: ExportBody, who: Principal) -> Reply:
        await _scoped(ledger, who, "export", r.scope_id, None)
        req = ExportRequest(
            r.scope_id,
            tuple(r.streams),
            r.include_non_active,
            r.cursor,
            min(r.limit, 1000),
        )
        return await ledger.transfer.export(req, _actor(r, who))

    return await serve(ledger, "export", msg, ExportBody, handle)


async def import_(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: ImportBody, who: Principal) -> Reply:
        if r.scope_id is None:
            await ledger.access.operator(who, "import", "import without a target scope")
        else:
            await ledger.access.scope(who, r.scope_id, "import")
        operator = who.kind == "operator"
        req = ImportRequest(r.jsonl, r.scope_id, restore_audit=operator)
        reply = await ledger.transfer.import_jsonl(req, _actor(r, who))
        await ledger.relay.flush()
        return reply

    return await serve(ledger, "import", msg, ImportBody, handle)


async def propose(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: ProposeBody, who: Principal) -> Reply:
        op = "observation.propose"
        await _may_propose(ledger, who, r.scope_id, op, declared=r.authority is not None)
        proposal = _proposal(r.scope_id, r, r.observed_at or datetime.now(UTC))
        reply = await ledger.observations.propose(proposal, _actor(r, who))
        await ledger.relay.flush()
        return reply

    return await serve(ledger, "observation.propose", msg, ProposeBody, handle)


async def propose_batch(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: ProposeBatchBody, who: Principal) -> Reply:
        declared = any(o.authority is not None for o in r.observations)
        await _may_propose(ledger, who, r.scope_id, "observation.propose_batch", declared=declared)
        at = r.observed_at or datetime.now(UTC)
        proposals = [_proposal(r.scope_id, o, at) for o in r.observations]
        items = await ledger.observations.propose_batch(proposals, _actor(r, who))
        await ledger.relay.flush()
        return {"items": items}

    return await serve(ledger, "observation.propose_batch", msg, ProposeBatchBody, handle)


async def _may_propose(
    ledger: Ledger, who: Principal, scope_id: str, op: str, *, declared: bool
) -> None:
    await ledger.access.scope(who, scope_id, op)
    if declared:  # an explicit authority wins over the evidence's: not a user's to declare
        await ledger.access.curator(who, f"{op} with an explicit authority")


def _proposal(scope_id: str, o: ProposedObservation, observed_at: datetime) -> Proposal:
    return Proposal(
        scope_id,
        o.subject,
        o.predicate,
        o.claim_domain,
        o.text,
        o.evidence_ids,
        observed_at,
        o.authority,
    )


async def observation_list(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    """A scope's observations, the held ones (awaiting review) by default."""

    async def handle(r: ObservationListBody, who: Principal) -> Reply:
        await ledger.access.scope(who, r.scope_id, "observation.list")
        state = None if r.state == "all" else r.state
        limit = min(r.limit, ledger.caps.max_results)
        return await ledger.observations.listing(r.scope_id, state, limit)

    return await serve(ledger, "observation.list", msg, ObservationListBody, handle)


async def observation_release(
    body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)
) -> Reply:
    """A person releases a held observation after review (the scope's owner or the operator)."""

    async def handle(r: ObservationRef, who: Principal) -> Reply:
        scope_id = await ledger.observations.scope_of(r.observation_id)
        if scope_id is not None:
            await ledger.access.scope(who, scope_id, "observation.release")
        reply = await ledger.observations.release(r.observation_id, _actor(r, who))
        await ledger.relay.flush()
        return reply

    return await serve(ledger, "observation.release", msg, ObservationRef, handle)


async def _named(
    ledger: Ledger, who: Principal, op: str, scope_id: str | None, session_id: str | None
) -> None:
    """Refuse unless `who` may act on the scope and the session the request names."""
    if scope_id is not None:
        await ledger.access.scope(who, scope_id, op)
    if session_id is not None:
        await ledger.access.session(who, session_id, op)


async def _scoped(
    ledger: Ledger, who: Principal, op: str, scope_id: str | None, session_id: str | None
) -> None:
    """As `_named`; naming neither means every scope, which only the operator may ask for."""
    if scope_id is None and session_id is None:
        await ledger.access.operator(who, op, f"{op} across every scope")
    await _named(ledger, who, op, scope_id, session_id)
