"""Facts survive a failed publish: they stay staged with the change and a later flush sends them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tavern_ledger.app import migrations
from tavern_ledger.domain.scopes import Binding
from tavern_ledger.domain.store_requests import MemoryWrite
from tavern_ledger.memorystore import operations as memory
from tavern_ledger.scopes import bindings
from tavern_ledger.toolcalls import outbox
from tavern_ledger.toolcalls.context import StoreContext
from tavern_runtime import pg
from tavern_runtime.migrations import migrate

pytestmark = pytest.mark.integration


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Any]:
    pool = await pg.create_pool(database_url, max_size=4)
    await migrate(pool, migrations())
    async with pool.acquire() as conn:
        binding = Binding("s1", "agent-tavern", "dsh-native", "chat_1", None, None, "main", None, 1)
        await bindings.apply(conn, binding)
    yield pool
    await pool.close()


async def bus_down(subject: str, data: bytes, msg_id: str) -> None:
    raise ConnectionError("nats is away")


async def test_a_failed_publish_leaves_the_fact_staged_until_a_flush_sends_it(pool: Any) -> None:
    ctx = StoreContext(pool=pool, publish=bus_down)
    request = MemoryWrite(session_id="s1", scope="chat", content="the well is dry")
    written = await memory.write(ctx, request)
    assert written["revision"] == 1  # the change committed even though the bus was away
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM ledger.store_outbox") == 1

    sent: list[tuple[str, str]] = []

    async def bus_up(subject: str, data: bytes, msg_id: str) -> None:
        sent.append((subject, msg_id))

    assert await outbox.flush(pool, bus_up, older_than_s=0) == 1
    [(subject, _)] = sent
    assert subject == "tavern.ledger.chat_1.memory.changed"
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM ledger.store_outbox") == 0
