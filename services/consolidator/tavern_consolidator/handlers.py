"""Every subscriber and RPC of the consolidator service: the registration table.

The durable consumers of LEDGER (`consolidator-ledger`) and SESSIONS (`consolidator-sessions`)
are not FastStream subscribers: `Consolidator.consumers` read them in ordered batches and the
app starts them after the broker. Distillation runs in the background worker, never here.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from faststream.nats import NatsBroker

from tavern_consolidator import ownership
from tavern_consolidator import requests as rq
from tavern_consolidator.consolidator import CONSOLIDATOR_KEY, SERVICE, Consolidator
from tavern_consolidator.rpc import Reply, serve
from tavern_consolidator.store import audit, connection
from tavern_events import subjects
from tavern_runtime import rpc
from tavern_runtime.context import Context, Message
from tavern_runtime.errors import TavernError
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

VERSION = version("tavern-consolidator")
RPC_QUEUE = f"{SERVICE}-rpc"
C = Context(CONSOLIDATOR_KEY)


async def ping() -> dict[str, object]:
    """`tavern.rpc.consolidator.ping`: which service and version answered over the bus."""
    return {"service": SERVICE, "version": VERSION, "ok": True}


async def status(body: Any, msg: Message, c: Consolidator = C) -> Reply:
    return await serve("status", msg.body, rq.ScopeBody, lambda r: c.status(r.scope_id))


async def distil(body: Any, msg: Message, c: Consolidator = C) -> Reply:
    async def handle(r: rq.DistilBody) -> Reply:
        return await c.distillation.run(r.scope_id, force=r.force)

    return await serve("distil", msg.body, rq.DistilBody, handle)


async def explain(body: Any, msg: Message, c: Consolidator = C) -> Reply:
    return await serve("explain", msg.body, rq.ExplainBody, lambda r: c.explain(r.evidence_id))


async def profile(body: Any, msg: Message, c: Consolidator = C) -> Reply:
    async def handle(r: rq.ProfileBody) -> Reply:
        return await c.profiles.get(r.scope_id, r.session_id)

    return await serve("profile.get", msg.body, rq.ProfileBody, handle)


async def dream(body: Any, msg: Message, c: Consolidator = C) -> Reply:
    async def handle(r: rq.DreamBody) -> Reply:
        return await c.dreaming.run(r.scope_id, r.apply, r.actor)

    return await serve("dream.run", msg.body, rq.DreamBody, handle)


async def dream_review(body: Any, msg: Message, c: Consolidator = C) -> Reply:
    async def handle(r: rq.DreamReviewBody) -> Reply:
        return await c.dreaming.review(r.op, r.ids, r.scope_id, r.domain, r.actor)

    return await serve("dream.review", msg.body, rq.DreamReviewBody, handle)


async def rules_list(body: Any, msg: Message, c: Consolidator = C) -> Reply:
    return await serve(
        "rules.list", msg.body, rq.ScopeBody, lambda r: c.feedback.listing(r.scope_id)
    )


async def rules_decide(body: Any, msg: Message, c: Consolidator = C) -> Reply:
    async def handle(r: rq.RulesDecideBody) -> Reply:
        return await c.feedback.decide(r.scope_id, r.op, r.ref, r.actor)

    return await serve("rules.decide", msg.body, rq.RulesDecideBody, handle)


async def rules_draft(body: Any, msg: Message, c: Consolidator = C) -> Reply:
    return await serve(
        "rules.draft", msg.body, rq.ScopeBody, lambda r: c.feedback.draft(r.scope_id)
    )


async def rules_rebuild(body: Any, msg: Message, c: Consolidator = C) -> Reply:
    async def handle(r: rq.OptionalScopeBody) -> Reply:
        return await c.feedback.rebuild(r.scope_id)

    return await serve("rules.rebuild", msg.body, rq.OptionalScopeBody, handle)


async def approvals(body: Any, msg: Message, c: Consolidator = C) -> Reply:
    async def handle(r: rq.ApprovalsBody) -> Reply:
        return await c.expression.surface(r.session_id)

    return await serve("approvals.next", msg.body, rq.ApprovalsBody, handle)


async def expression_list(body: Any, msg: Message, c: Consolidator = C) -> Reply:
    async def handle(r: rq.ExpressionListBody) -> Reply:
        return await c.expression.listing(r.scope_id, r.pending)

    return await serve("expression.list", msg.body, rq.ExpressionListBody, handle)


async def expression_decide(body: Any, msg: Message, c: Consolidator = C) -> Reply:
    async def handle(r: rq.ExpressionDecideBody) -> Reply:
        return await c.expression.decide(r.candidate_id, r.decision, r.actor)

    return await serve("expression.decide", msg.body, rq.ExpressionDecideBody, handle)


async def audit_trail(body: Any, msg: Message, c: Consolidator = C) -> Reply:
    async def handle(r: rq.AuditBody) -> Reply:
        async with connection(c.pool) as conn:
            return {"entries": await audit.query(conn, r.scope_id, r.op, r.limit)}

    return await serve("audit", msg.body, rq.AuditBody, handle)


RPCS: dict[str, Any] = {
    "status": status,
    "distil": distil,
    "explain": explain,
    "profile.get": profile,
    "dream.run": dream,
    "dream.review": dream_review,
    "rules.list": rules_list,
    "rules.decide": rules_decide,
    "rules.draft": rules_draft,
    "rules.rebuild": rules_rebuild,
    "approvals.next": approvals,
    "expression.list": expression_list,
    "expression.decide": expression_decide,
    "audit": audit_trail,
}
"""`tavern.rpc.consolidator.<op>` -> handler (request/reply, one queue group across replicas)."""


def guarded(op: str, handler: Any) -> Any:
    """`handler` behind the access check (`tavern_consolidator.access`): a refusal is the
    reply, and the handler never runs."""

    async def checked(body: Any, msg: Message, c: Consolidator = C) -> Reply:
        refusal = await rpc.answer(op, lambda: _refused(c, op, msg))
        return refusal if refusal else await handler(body, msg, c)

    checked.__name__ = checked.__qualname__ = getattr(handler, "__name__", op)
    checked.__doc__ = handler.__doc__
    return checked


async def _refused(c: Consolidator, op: str, msg: Message) -> Reply:
    who = c.access.check(op, msg.headers)
    if who.user is not None and op in ownership.USER_OPS:
        try:
            await ownership.check(c.pool, op, msg.body, who, c.owns)
        except TavernError as exc:
            log.warning("access_refused", rpc=op, code=exc.code, principal=who.label)
            raise
    return {}


def register(broker: NatsBroker) -> None:
    """Bind every handler of the service to `broker`."""
    broker.subscriber(subjects.rpc(SERVICE, "ping"), queue=RPC_QUEUE)(ping)
    for op, handler in RPCS.items():
        broker.subscriber(subjects.rpc(SERVICE, op), queue=RPC_QUEUE)(guarded(op, handler))
