"""`tavern.rpc.ledger.claim.supersede`: the consolidator's model judgement, ended through the
ledger's write path. The consolidator's (a service on its own account) and the operator's."""

from __future__ import annotations

from typing import Any

from tavern_ledger.changes import Actor
from tavern_ledger.claims import Judgement
from tavern_ledger.handlers.rpc import Reply, serve
from tavern_ledger.ledger import LEDGER_KEY, Ledger
from tavern_ledger.requests import ClaimSupersedeBody
from tavern_runtime.context import Context, Message
from tavern_runtime.principals import Principal

OP = "claim.supersede"


async def supersede(body: Any, msg: Message, ledger: Ledger = Context(LEDGER_KEY)) -> Reply:
    async def handle(r: ClaimSupersedeBody, who: Principal) -> Reply:
        await ledger.access.curator(who, OP)
        judgement = Judgement(r.evidence_id, tuple(r.supersedes), r.decision)
        reason = r.reason or f"model judged: {r.decision}"
        reply = await ledger.claims.supersede(judgement, Actor(r.actor, reason))
        await ledger.relay.flush()
        return reply

    return await serve(ledger, OP, msg, ClaimSupersedeBody, handle)
