"""What real PostgreSQL errors become: data the server can never hold is `invalid` (retrying
cannot help), a server that is away is `unavailable` (retryable)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tavern_runtime import pg
from tavern_runtime.embedded import free_port
from tavern_runtime.errors import TavernError
from tavern_runtime.pgerrors import StoreRejected, transaction


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[pg.Pool]:
    opened = await pg.create_pool(database_url, max_size=2)
    async with opened.acquire() as conn:
        await conn.execute(
            """CREATE TABLE probe (
                   name varchar(8) NOT NULL UNIQUE,
                   n int CHECK (n >= 0),
                   doc jsonb)"""
        )
    yield opened
    await opened.close()


@pytest.mark.parametrize(
    ("sql", "args"),
    [
        ("INSERT INTO probe (name) VALUES ($1)", ("a\x00b",)),
        ("INSERT INTO probe (name) VALUES ($1)", ("lone \ud800",)),
        ("INSERT INTO probe (name) VALUES ($1)", ("far too long for it",)),
        ("INSERT INTO probe (name, n) VALUES ($1, $2)", ("neg", -1)),
        ("INSERT INTO probe (name, doc) VALUES ($1, $2::jsonb)", ("j", '{"a": "\\u0000"}')),
        ("INSERT INTO probe (name, n) VALUES ($1, $2)", ("big", 2**40)),
        ("INSERT INTO probe (name) VALUES (NULL)", ()),
    ],
)
async def test_data_postgres_refuses_is_invalid_never_unavailable(
    pool: pg.Pool, sql: str, args: tuple[object, ...]
) -> None:
    with pytest.raises(StoreRejected) as caught:
        async with transaction(lambda: pool) as conn:
            await conn.execute(sql, *args)
    reply = caught.value.as_reply()["error"]
    assert (reply["code"], reply["retryable"], reply["reason"]) == (
        "invalid",
        False,
        "store_rejected",
    )


async def test_a_duplicate_is_invalid_too(pool: pg.Pool) -> None:
    async with transaction(lambda: pool) as conn:
        await conn.execute("INSERT INTO probe (name) VALUES ('once')")
    with pytest.raises(StoreRejected):
        async with transaction(lambda: pool) as conn:
            await conn.execute("INSERT INTO probe (name) VALUES ('once')")


async def test_a_server_that_is_not_there_is_unavailable_and_retryable() -> None:
    with pytest.raises(TavernError) as caught:
        await pg.create_pool(f"postgresql://u:p@127.0.0.1:{free_port()}/x")
    reply = caught.value.as_reply()["error"]
    assert (reply["code"], reply["retryable"]) == ("unavailable", True)
    assert "p@" not in reply["message"]
