"""`ledger.session_binding` and `ledger.turn_closed`: the stores' projection of session events.

Every write is idempotent and ordered by the event's seq, so redelivery changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Any, Literal

from tavern_ledger.domain.bindings import Effect, ModeChange, TurnClosed
from tavern_ledger.domain.scopes import Binding, evidence_scope_of
from tavern_ledger.scopes import owners

Applied = Literal["applied", "stale", "missing"]
Conn = Any
"""An asyncpg connection (asyncpg ships no type information)."""

_UPSERT = """
WITH claimed AS (
  INSERT INTO ledger.scope_owner (scope_id, owner) SELECT s, $11 FROM unnest($12::text[]) AS s
  ON CONFLICT (scope_id) DO NOTHING
)
INSERT INTO ledger.session_binding (session_id, architecture, context_mode, chat_id, character_id,
                                    persona_id, agent_id, parent_session_id, updated_seq,
                                    memory_reach, owner)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (session_id) DO UPDATE SET
  architecture = EXCLUDED.architecture, context_mode = EXCLUDED.context_mode,
  chat_id = EXCLUDED.chat_id, character_id = EXCLUDED.character_id,
  persona_id = EXCLUDED.persona_id, agent_id = EXCLUDED.agent_id,
  parent_session_id = EXCLUDED.parent_session_id, updated_seq = EXCLUDED.updated_seq,
  memory_reach = EXCLUDED.memory_reach, owner = EXCLUDED.owner, updated_at = now()
WHERE ledger.session_binding.updated_seq < EXCLUDED.updated_seq
"""
_CHANGE_MODE = """
UPDATE ledger.session_binding
SET architecture = $2, context_mode = $3, updated_seq = $4, updated_at = now()
WHERE session_id = $1 AND updated_seq < $4
"""


async def apply(conn: Conn, effect: Effect) -> Applied:
    """Apply one effect, in one statement that needs no transaction of its own; "missing" means a
    mode change for a binding not seen yet."""
    if isinstance(effect, Binding):
        return await _bind(conn, effect)
    if isinstance(effect, ModeChange):
        return await _change_mode(conn, effect)
    return await close_turn(conn, effect)


async def apply_all(conn: Conn, effects: Sequence[Effect]) -> list[Applied]:
    """`apply` of each effect in order; consecutive turn ends go in one statement. The scopes
    of every binding are claimed first, in one statement in key order (`owners.claim_all`), so
    that this batch and ingestion's, claiming the same new scopes, never wait in a circle."""
    bound = [e for e in effects if isinstance(e, Binding)]
    if len(bound) > 1:  # each binding's own claim then finds its scopes taken by this batch
        await owners.claim_all(conn, [(b.owner, _scopes(b)) for b in bound])
    applied: list[Applied] = []
    for closing, run in groupby(effects, key=lambda e: isinstance(e, TurnClosed)):
        if closing:
            applied += await close_turns(conn, [e for e in run if isinstance(e, TurnClosed)])
        else:
            applied += [await apply(conn, effect) for effect in run]
    return applied


async def _bind(conn: Conn, b: Binding) -> Applied:
    # The claim comes with the binding, in its statement, and never moves: a session naming
    # another owner's chat or character is bound, but `resolve_scope` refuses it those scopes.
    scopes = owners.claimable(_scopes(b))
    status = await conn.execute(
        _UPSERT,
        b.session_id,
        b.architecture,
        b.context_mode,
        b.chat_id,
        b.character_id,
        b.persona_id,
        b.agent_id,
        b.parent_session_id,
        b.updated_seq,
        b.memory_reach,
        b.owner,
        scopes,
    )
    return "applied" if _count(status) else "stale"


def _scopes(b: Binding) -> tuple[str | None, ...]:
    return (b.chat_id, b.session_id, b.character_id, evidence_scope_of(b))


async def _change_mode(conn: Conn, change: ModeChange) -> Applied:
    status = await conn.execute(
        _CHANGE_MODE, change.session_id, change.architecture, change.context_mode, change.seq
    )
    if _count(status):
        return "applied"
    known = await conn.fetchval(
        "SELECT 1 FROM ledger.session_binding WHERE session_id = $1", change.session_id
    )
    return "stale" if known else "missing"


async def close_turn(conn: Conn, closed: TurnClosed) -> Applied:
    """Record the turn's end and drop its turn-scope variables (and any earlier turn's): one
    statement (`ledger.close_turn`, under the turn lock), atomic with or without a transaction."""
    await conn.execute("SELECT ledger.close_turn($1, $2)", closed.session_id, closed.turn)
    return "applied"


async def close_turns(conn: Conn, closed: Sequence[TurnClosed]) -> list[Applied]:
    """`close_turn` of each, in one statement (atomic on its own, or in the caller's batch)."""
    if len(closed) == 1:
        return [await close_turn(conn, closed[0])]
    await conn.execute(
        "SELECT ledger.close_turn(s, t) FROM unnest($1::text[], $2::int[]) WITH ORDINALITY "
        "AS u(s, t, n) ORDER BY n",
        [c.session_id for c in closed],
        [c.turn for c in closed],
    )
    return ["applied"] * len(closed)


async def lock_turns(conn: Conn, session_id: str) -> None:
    """Serialise turn-scope writes with the turn's end (transaction-scoped advisory lock; the
    same key as `ledger.close_turn` takes)."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext('ledger-turn:' || $1))", session_id)


async def last_ended_turn(conn: Conn, session_id: str) -> int:
    value = await conn.fetchval(
        "SELECT last_ended_turn FROM ledger.turn_closed WHERE session_id = $1", session_id
    )
    return int(value) if value is not None else -1


async def load(conn: Conn, session_id: str) -> Binding | None:
    row = await conn.fetchrow(
        "SELECT session_id, architecture, context_mode, chat_id, character_id, persona_id, "
        "agent_id, parent_session_id, updated_seq, memory_reach, owner "
        "FROM ledger.session_binding "
        "WHERE session_id = $1",
        session_id,
    )
    return Binding(**dict(row)) if row is not None else None


def _count(status: str) -> int:
    """The row count of an asyncpg status string (`INSERT 0 1`, `UPDATE 0`)."""
    return int(status.rsplit(" ", 1)[-1])
