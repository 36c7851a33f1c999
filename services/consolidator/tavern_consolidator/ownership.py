"""Which scopes a user's request to the consolidator names, and whether the user owns them.

The ledger keeps who owns a scope; the consolidator asks it, as itself acting for the user, for
every scope the request names (a rule's, an expression candidate's, a pool entry's). Only the
review operations (`USER_OPS`) serve users; a request that names no scope, or one the ledger
says is not theirs, is refused."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from tavern_consolidator.store import Conn, connection, dreams, expression
from tavern_runtime.errors import Forbidden
from tavern_runtime.principals import Principal

USER_OPS = frozenset(
    {"rules.list", "rules.decide", "expression.list", "expression.decide", "dream.review"}
)
"""What a user may ask for their own scopes: the rule drafts and style and pool candidates
behind the human gate, and the decisions on them."""

Owns = Callable[[Principal, str], Awaitable[None]]
"""Raise unless the principal's user owns the scope (the ledger decides)."""


async def check(pool: Any, op: str, raw: bytes, who: Principal, owns: Owns) -> None:
    """Refuse unless every scope the request names is the user's and it signs as them."""
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        return  # the handler answers `invalid`
    if not isinstance(body, dict):
        return
    actor = body.get("actor")
    if actor is not None and actor != who.label:
        raise Forbidden(f"{who.label} may not sign the audit trail as {actor!r}")
    async with connection(pool) as conn:
        scopes = await named(conn, op, body)
    if not scopes:
        raise Forbidden(f"{op} for a user names one of their scopes")
    for scope in sorted(scopes):
        await owns(who, scope)


async def named(conn: Conn, op: str, body: dict[str, Any]) -> set[str]:
    """The scopes `op` would read or change (empty: it names none a user could own)."""
    scope = body.get("scope_id")
    if op == "expression.decide":
        found = await expression.scope_of(conn, str(body.get("candidate_id") or ""))
        return {found} if found else set()
    if op == "dream.review" and body.get("op") in ("approve", "reject"):
        scopes = await dreams.scopes_of(conn, [str(i) for i in body.get("ids") or ()])
        return scopes | ({str(scope)} if scope else set())
    return {str(scope)} if isinstance(scope, str) and scope else set()
