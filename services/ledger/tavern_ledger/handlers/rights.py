"""RPC handlers of recall and the user rights: each parses its request, calls one use case and
flushes the LEDGER facts the change committed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tavern_ledger.changes import Actor
from tavern_ledger.domain.observations import Proposal
from tavern_ledger.errors import RequestInvalid
from tavern_ledger.handlers.rpc import Reply, serve
from tavern_ledger.ledger import LEDGER_KEY, Ledger
from tavern_ledger.recall import RecallRequest
from tavern_ledger.requests import (
    AuditBody,
    CorrectBody,
    EvidenceRef,
    ExportBody,
    ImportBody,
    ProposeBody,
    QueryBody,
    RecallBody,
    StatsBody,
)
from tavern_ledger.rights import Correction
from tavern_ledger.store.evidence import EvidenceFilter
from tavern_ledger.transfer import ExportRequest
from tavern_runtime.context import Context, Message


def _actor(body: Any) -> Actor:
    return Actor(body.actor, body.reason)


async def recall(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: RecallBody) -> Reply:
        request = RecallRequest(
            r.session_id, r.query[: ledger.caps.max_query_chars], r.turn, r.step, r.explain, r.as_of
        )
        return await ledger.recaller.recall(request)

    # The composer's token budget bounds the reply.
    return await serve(ledger, "recall", msg.body, RecallBody, handle, bounded=False)


async def query(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: QueryBody) -> Reply:
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
        return await ledger.rights.query(f)

    return await serve(ledger, "query", msg.body, QueryBody, handle)


async def inspect(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: EvidenceRef) -> Reply:
        return await ledger.rights.inspect(r.evidence_id)

    return await serve(ledger, "inspect", msg.body, EvidenceRef, handle)


async def history(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: EvidenceRef) -> Reply:
        return await ledger.rights.history(r.evidence_id)

    return await serve(ledger, "history", msg.body, EvidenceRef, handle)


async def correct(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: CorrectBody) -> Reply:
        if not (r.evidence_id or r.session_id or r.scope_id):
            raise RequestInvalid("a correction names evidence_id, session_id or scope_id")
        c = Correction(r.text, r.evidence_id, r.session_id or "", r.scope_id)
        reply = await ledger.rights.correct(c, _actor(r))
        await ledger.relay.flush()
        return reply

    return await serve(ledger, "correct", msg.body, CorrectBody, handle)


def transition(op: str) -> Any:
    """The handler of one evidence transition (quarantine, release, redact, delete, rollback)."""

    async def handler(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
        async def handle(r: EvidenceRef) -> Reply:
            reply = await ledger.rights.transition(r.evidence_id, op, _actor(r))
            await ledger.relay.flush()
            return reply

        return await serve(ledger, op, msg.body, EvidenceRef, handle)

    handler.__name__ = op
    return handler


async def stats(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: StatsBody) -> Reply:
        return await ledger.rights.stats(r.scope_id)

    return await serve(ledger, "stats", msg.body, StatsBody, handle)


async def audit(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: AuditBody) -> Reply:
        limit = min(r.limit, ledger.caps.max_results)
        return await ledger.rights.audit(
            op=r.op, scope_id=r.scope_id, actor=r.by, target_id=r.target_id, limit=limit
        )

    return await serve(ledger, "audit", msg.body, AuditBody, handle)


async def export(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: ExportBody) -> Reply:
        req = ExportRequest(
            r.scope_id,
            tuple(r.streams),
            r.include_non_active,
            r.cursor,
            min(r.limit, 1000),
        )
        return await ledger.transfer.export(req, _actor(r))

    return await serve(ledger, "export", msg.body, ExportBody, handle)


async def import_(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: ImportBody) -> Reply:
        reply = await ledger.transfer.import_jsonl(r.jsonl, _actor(r))
        await ledger.relay.flush()
        return reply

    return await serve(ledger, "import", msg.body, ImportBody, handle)


async def propose(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: ProposeBody) -> Reply:
        proposal = Proposal(
            r.scope_id,
            r.subject,
            r.predicate,
            r.claim_domain,
            r.text,
            r.evidence_ids,
            r.observed_at or datetime.now(UTC),
            r.authority,
        )
        reply = await ledger.observations.propose(proposal, _actor(r))
        await ledger.relay.flush()
        return reply

    return await serve(ledger, "observation.propose", msg.body, ProposeBody, handle)
