"""Scope resolution: a request's scopes come from its session's binding, never from arguments."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tavern_ledger import audit
from tavern_ledger.domain.scopes import (
    Binding,
    Scopes,
    forged_claims,
    refuse_forged,
    scopes_of,
)
from tavern_ledger.domain.store_requests import StoreRequest
from tavern_ledger.scopes.bindings import Conn
from tavern_ledger.toolcalls.errors import ScopeForbidden, UnknownSession
from tavern_runtime.logs import get_logger

log = get_logger(__name__)


_RESOLVE = """
SELECT b.session_id, b.architecture, b.context_mode, b.chat_id, b.character_id, b.persona_id,
       b.agent_id, b.parent_session_id, b.updated_seq, b.memory_reach, b.owner,
       (SELECT o.owner FROM ledger.scope_owner o WHERE o.scope_id = b.chat_id) AS chat_owner,
       (SELECT o.owner FROM ledger.scope_owner o
         WHERE o.scope_id = coalesce($2, b.character_id)) AS character_owner
FROM ledger.session_binding b
WHERE b.session_id = $1
"""


async def resolve_scope(conn: Conn, session_id: str, member: str | None = None) -> Scopes:
    """The scopes of `session_id`, or `UnknownSession` if its binding is not known; for a
    group chat's speaking `member`, its `character` scope is that member's (held to the
    session's owner like any character). One statement: the binding and the owners of the
    scopes it names."""
    row = await conn.fetchrow(_RESOLVE, session_id, member)
    if row is None:
        raise UnknownSession(f"session {session_id!r} has no binding (yet)")
    found = dict(row)
    owners = Owners(chat=found.pop("chat_owner"), character=found.pop("character_owner"))
    binding = Binding(**found)
    scopes = scopes_of(binding)
    if member is not None:
        scopes = replace(scopes, character=member)
    return _owned(binding, scopes, owners)


@dataclass(frozen=True)
class Owners:
    """Who claimed the session's chat and character scopes (None: nobody yet)."""

    chat: str | None
    character: str | None


def _owned(binding: Binding, scopes: Scopes, owners: Owners) -> Scopes:
    """The scopes, held to the session's owner: a chat claimed by another owner is refused;
    a character claimed by another owner is left out (its memory is not this user's)."""
    if owners.chat is not None and owners.chat != binding.owner:
        raise ScopeForbidden(
            f"session {binding.session_id!r} names a chat that belongs to another user"
        )
    if scopes.character is not None and owners.character not in (None, binding.owner):
        log.info("character_scope_withheld", session_id=binding.session_id)
        return replace(scopes, character=None)
    return scopes


async def authorise(conn: Conn, request: StoreRequest, tool: str) -> Scopes:
    """The session's scopes; a request naming another scope is audited, then refused."""
    scopes = await resolve_scope(conn, request.session_id, request.member)  # unknown: caught up
    forged = forged_claims(scopes, request.addressed_scope, request.claims())
    if forged:
        await refuse(conn, request, scopes, tool, "forged scope ids", forged)
        raise refuse_forged(forged)
    return scopes


async def refuse(
    conn: Conn,
    request: StoreRequest,
    scopes: Scopes,
    tool: str,
    reason: str,
    named: dict[str, str],
) -> None:
    """Audit a refused cross-scope request (outside any transaction that will roll back)."""
    entry = audit.ToolCallEntry(
        session_id=request.session_id,
        tool=tool,
        op="store.scope_forbidden",
        scope_id=scopes.chat,
        scope=request.addressed_scope,
        reason=reason,
        detail={"named": named, "turn": request.turn, "call_id": request.call_id},
    )
    await audit.append_tool_call(conn, entry)
    log.warning("store_scope_forbidden", session_id=request.session_id, tool=tool, named=named)
