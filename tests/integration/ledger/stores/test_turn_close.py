"""A turn's end in one statement (`ledger.close_turn`) and a tool call's scopes in one read:
the turn lock still serialises them with turn-scope writes, and claims still hold."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tavern_ledger.domain.bindings import TurnClosed
from tavern_ledger.domain.scopes import Scopes
from tavern_ledger.scopes import bindings
from tavern_ledger.scopes.tool_calls import resolve_scope
from tavern_ledger.toolcalls.errors import ScopeForbidden, UnknownSession
from tests.integration.ledger.stores.conftest import Ledger

pytestmark = pytest.mark.integration


async def turn_rows(db: asyncpg.Connection, session_id: str) -> int:
    return int(
        await db.fetchval(
            "SELECT count(*) FROM ledger.variable_scope WHERE scope = 'turn' AND scope_id = $1",
            session_id,
        )
    )


async def test_a_turn_end_waits_for_a_turn_scope_write_and_drops_what_it_wrote(
    ledger: Ledger, database_url: str
) -> None:
    writer = await asyncpg.connect(database_url)
    try:
        tx = writer.transaction()
        await tx.start()
        await bindings.lock_turns(writer, "s1")  # as a turn-scope variable write does
        await writer.execute(
            "INSERT INTO ledger.variable_scope (scope, scope_id, turn) VALUES ('turn', 's1', 1)"
        )
        closing = asyncio.create_task(bindings.close_turn(ledger.db, TurnClosed("s1", 1)))
        await asyncio.sleep(0.3)
        assert not closing.done()  # the end waits for the write's lock
        await tx.commit()
        assert await asyncio.wait_for(closing, 5) == "applied"
    finally:
        await writer.close()
    assert await turn_rows(ledger.db, "s1") == 0  # committed while the end waited: still dropped
    assert await bindings.last_ended_turn(ledger.db, "s1") == 1


async def test_a_turn_end_is_idempotent_and_never_moves_back(ledger: Ledger) -> None:
    await ledger.db.execute(
        "INSERT INTO ledger.variable_scope (scope, scope_id, turn) "
        "VALUES ('turn', 's1', 2), ('turn', 's1', 3)"
    )
    for turn in (2, 2, 1):  # a redelivery, then an older end
        assert await bindings.close_turn(ledger.db, TurnClosed("s1", turn)) == "applied"
    assert await bindings.last_ended_turn(ledger.db, "s1") == 2
    assert await turn_rows(ledger.db, "s1") == 1  # turn 3 is still open


async def test_a_run_of_turn_ends_in_one_statement_ends_each_as_one_by_one(
    ledger: Ledger,
) -> None:
    await ledger.db.execute(
        "INSERT INTO ledger.variable_scope (scope, scope_id, turn) "
        "VALUES ('turn', 's1', 2), ('turn', 's1', 3), ('turn', 's2', 1)"
    )
    ends = [TurnClosed("s1", 2), TurnClosed("s2", 1), TurnClosed("s1", 2), TurnClosed("s1", 1)]
    assert await bindings.apply_all(ledger.db, ends) == ["applied"] * 4
    assert await bindings.last_ended_turn(ledger.db, "s1") == 2
    assert await bindings.last_ended_turn(ledger.db, "s2") == 1
    assert await turn_rows(ledger.db, "s1") == 1  # turn 3 is still open
    assert await turn_rows(ledger.db, "s2") == 0


async def test_scopes_of_a_tool_call_are_held_to_their_claims(ledger: Ledger) -> None:
    await ledger.db.execute(
        "INSERT INTO ledger.scope_owner (scope_id, owner) "
        "VALUES ('char_bob', 'bob'), ('chat_bob', 'bob')"
    )
    await ledger.open_session("s1", "chat_1", "char_a")
    assert await resolve_scope(ledger.db, "s1") == Scopes("chat_1", "char_a", "s1")
    # A group member claimed by another owner is left out; an unclaimed one is the session's.
    assert await resolve_scope(ledger.db, "s1", "char_bob") == Scopes("chat_1", None, "s1")
    assert await resolve_scope(ledger.db, "s1", "char_new") == Scopes("chat_1", "char_new", "s1")
    await ledger.open_session("s2", "chat_2", "char_bob")
    assert await resolve_scope(ledger.db, "s2") == Scopes("chat_2", None, "s2")
    claims = await ledger.db.fetch("SELECT scope_id, owner FROM ledger.scope_owner")
    assert {r["scope_id"]: r["owner"] for r in claims}.items() >= {
        "char_bob": "bob",  # a claim never moves
        "chat_bob": "bob",
        "chat_1": "local",  # claimed with the binding, in its statement
        "char_a": "local",
        "s1": "local",
        "chat_2": "local",
        "s2": "local",
    }.items()  # and the scopes of their evidence
    await ledger.open_session("s3", "chat_bob", "char_a")
    with pytest.raises(ScopeForbidden):
        await resolve_scope(ledger.db, "s3")
    with pytest.raises(UnknownSession):
        await resolve_scope(ledger.db, "nobody")
