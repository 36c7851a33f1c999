"""Intake's copies in as few statements as they allow: a batch of turn ends or evidence is one
statement with its scopes' state rows, a redelivered one changes nothing, and a batch that
changes nothing does not reach Postgres."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tavern_consolidator.app import migrations
from tavern_consolidator.domain.intake import Changes, TurnEnd
from tavern_consolidator.domain.records import Evidence
from tavern_consolidator.intake import Intake, Touched
from tavern_consolidator.store import batches, expression, facts
from tavern_runtime import pg
from tavern_runtime.migrations import migrate

pytestmark = pytest.mark.integration

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Any]:
    pool = await pg.create_pool(database_url, max_size=2)
    await migrate(pool, migrations())
    yield pool
    await pool.close()


async def nothing(*_: Any) -> None:
    raise AssertionError("nothing is dead-lettered here")


async def scopes(pool: Any) -> list[str]:
    rows = await pool.fetch("SELECT scope_id FROM consolidator.scope_state ORDER BY scope_id")
    return [r["scope_id"] for r in rows]


async def test_turn_ends_are_saved_once_with_their_scopes_in_one_statement(pool: Any) -> None:
    async with pool.acquire() as conn:
        await facts.save_sessions(conn, {"s1": "chat_1"})
        turns = [TurnEnd("e1", "s1", 1, T0), TurnEnd("e2", "s2", 1, T0), TurnEnd("e1", "s1", 1, T0)]
        assert sorted(await facts.save_turns(conn, turns)) == ["chat_1", "s2"]
        assert await facts.save_turns(conn, turns) == []  # redelivered: nothing new
    assert await scopes(pool) == ["chat_1", "s2"]
    assert await pool.fetchval("SELECT count(*) FROM consolidator.turn") == 2


async def test_evidence_is_saved_once_with_its_scopes_in_one_statement(pool: Any) -> None:
    e = Evidence("ev_1", "chat_1", "s1", "I like tea", "user_explicit", "user_fact", T0, seq=3)
    other = Evidence("ev_2", "chat_2", "s2", "hello", "user_message", "none", T0)
    async with pool.acquire() as conn:
        for _ in range(2):  # the second time as a redelivery
            await facts.save_evidence(conn, [(e, True), (other, False), (e, True)])
    assert await scopes(pool) == ["chat_1", "chat_2"]
    rows = await pool.fetch(
        "SELECT id, seq, digestible, observed_at FROM consolidator.evidence ORDER BY id"
    )
    assert [tuple(r) for r in rows] == [("ev_1", 3, True, T0), ("ev_2", None, False, T0)]


async def test_a_lone_turn_end_needs_no_transaction_and_an_empty_batch_no_database(
    pool: Any,
) -> None:
    def no_pool() -> Any:
        raise AssertionError("an empty batch must not reach Postgres")

    assert await Intake(no_pool, nothing)._apply(Changes()) == Touched(frozenset(), frozenset())
    lone = Changes(turns=[TurnEnd("e1", "s1", 1, T0)])
    assert facts.statements(lone) == 1
    touched = await Intake(lambda: pool, nothing)._apply(lone)
    assert touched == Touched(frozenset({"s1"}), frozenset({"s1"}))
    both = Changes(sessions={"s1": "chat_1"}, turns=[TurnEnd("e2", "s1", 2, T0)])
    assert facts.statements(both) == 2  # the session's scope first: one transaction
    touched = await Intake(lambda: pool, nothing)._apply(both)
    assert touched == Touched(frozenset({"chat_1"}), frozenset({"chat_1"}))


async def test_a_wake_reads_the_scope_its_batch_and_its_counts_in_one_statement(
    pool: Any,
) -> None:
    e = Evidence("ev_1", "chat_1", "s1", "I like tea", "user_explicit", "user_fact", T0)
    async with pool.acquire() as conn:
        fresh = await batches.wake(conn, "chat_1")  # creates the scope's bookkeeping
        assert (fresh.state.scope_id, fresh.open_batch, fresh.undigested, fresh.turns) == (
            "chat_1",
            False,
            0,
            0,
        )
        await facts.save_sessions(conn, {"s1": "chat_1"})
        await facts.save_evidence(conn, [(e, True)])
        await facts.save_turns(conn, [TurnEnd("e1", "s1", 1, T0)])
        found = await batches.wake(conn, "chat_1")
        assert (found.open_batch, found.undigested, found.turns) == (False, 1, 1)
        assert found.state == await batches.scope_state(conn, "chat_1")
        await conn.execute(
            "INSERT INTO consolidator.batch (scope_id, status, batch_from, batch_to, first_id, "
            "last_id, evidence_ids, size) VALUES ('chat_1', 'running', $1, $1, 'ev_1', 'ev_1', "
            "ARRAY['ev_1'], 1)",
            T0,
        )
        assert (await batches.wake(conn, "chat_1")).open_batch
    assert await scopes(pool) == ["chat_1"]


async def test_a_step_learns_in_one_read_whether_approval_requests_wait(pool: Any) -> None:
    async with pool.acquire() as conn:
        assert await expression.waiting(conn, "s1") == ("s1", False)  # not copied yet
        await facts.save_sessions(conn, {"s1": "chat_1"})
        assert await expression.waiting(conn, "s1") == ("chat_1", False)
        await conn.execute(
            "INSERT INTO consolidator.expression (candidate_id, scope_id, evidence_ids, state, "
            "decision) VALUES ('c1', 'chat_1', ARRAY['ev_1'], 'proposed', 'hold')"
        )
        assert await expression.waiting(conn, "s1") == ("chat_1", True)
        assert [p["candidate_id"] for p in await expression.surface(conn, "chat_1", T0, 5)] == [
            "c1"
        ]
        assert await expression.waiting(conn, "s1") == ("chat_1", False)  # shown once
