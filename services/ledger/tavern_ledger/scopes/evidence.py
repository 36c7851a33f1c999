"""The scope a session's evidence lives in, for recall and corrections: as ingestion saw the
session created, else as its binding says, held to the scope's owner."""

from __future__ import annotations

from tavern_ledger.domain.scopes import evidence_scope_of
from tavern_ledger.evidence import Conn
from tavern_ledger.scopes import bindings, owners

_INGESTED = """
SELECT s.scope, s.owner, (SELECT o.owner FROM ledger.scope_owner o WHERE o.scope_id = s.scope)
       AS claimed
FROM (SELECT coalesce(scope_id, chat_id) AS scope, owner FROM ledger.ingest_session
      WHERE session_id = $1) AS s
"""
"""The scope ingestion saw the session created in, its owner, and who claimed that scope."""


async def known_scope(conn: Conn, session_id: str) -> str | None:
    """The scope of a session's evidence as ingestion saw it created, else as its binding in
    the stores says (both follow `memory_scope`); None while neither has seen the session. A
    scope another owner claimed first is not this session's: its evidence stays in a scope of
    its own (the session id)."""
    found = await conn.fetchrow(_INGESTED, session_id)
    if found is not None and found["scope"]:
        scope, owner, claimed = str(found["scope"]), str(found["owner"]), found["claimed"]
    else:
        binding = await bindings.load(conn, session_id)
        if binding is None:
            return None
        scope, owner = evidence_scope_of(binding), binding.owner
        claimed = await owners.of_scope(conn, scope)
    return scope if claimed in (None, owner) else session_id


async def scope_of_session(conn: Conn, session_id: str) -> str:
    """The scope a session's evidence lives in: its chat, else (unknown yet) the session."""
    return await known_scope(conn, session_id) or session_id
