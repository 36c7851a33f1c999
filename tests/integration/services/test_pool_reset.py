"""The service pool gives connections back without a reset round trip, except those that said
they took session state: their session is reset in full, session locks included."""

from __future__ import annotations

import asyncpg
import pytest

from tavern_runtime import pg

pytestmark = pytest.mark.integration

LOCK = (4242, 7)


async def _lock_holders(admin: asyncpg.Connection) -> int:
    return int(
        await admin.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
            "AND classid = $1 AND objid = $2 AND granted",
            *LOCK,
        )
    )


async def test_a_marked_connection_comes_back_without_its_session_lock(database_url: str) -> None:
    pool = await pg.create_pool(database_url, max_size=1)
    admin = await asyncpg.connect(database_url)
    try:
        async with pool.acquire() as conn:
            pg.holds_session_state(conn)
            await conn.execute("SELECT pg_advisory_lock($1, $2)", *LOCK)
            assert await _lock_holders(admin) == 1
        assert await _lock_holders(admin) == 0  # released by the reset, not by the code
        async with pool.acquire() as conn:  # the same connection, now unmarked
            await conn.execute("SELECT pg_advisory_lock($1, $2)", *LOCK)
        # Unmarked, its session goes back as it is: the caller must not take session state
        # without saying so.
        assert await _lock_holders(admin) == 1
    finally:
        await admin.close()
        await pool.close()


async def test_an_open_transaction_is_rolled_back_on_release(database_url: str) -> None:
    pool = await pg.create_pool(database_url, max_size=1)
    try:
        await pool.execute("CREATE TABLE t (id int)")
        async with pool.acquire() as conn:
            tx = conn.transaction()
            await tx.start()
            await conn.execute("INSERT INTO t VALUES (1)")
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT count(*) FROM t") == 0
    finally:
        await pool.close()
