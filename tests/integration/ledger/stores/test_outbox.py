"""Memory and variable facts go through the ledger's one outbox: queued with the change, kept while
the LEDGER stream cannot take them, published once by the relay when it can; facts left in the
stores' old outbox move over when the ledger is upgraded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from tavern_events.envelope import LedgerFact
from tavern_events.ledger import MemoryChanged, VariableChanged
from tavern_events.streams import LEDGER
from tavern_events.union import decode
from tavern_ledger.app import migrations
from tavern_ledger.domain.scopes import Binding
from tavern_ledger.domain.store_requests import MemoryWrite, VariableSet
from tavern_ledger.memorystore import operations as memory
from tavern_ledger.relay import Relay
from tavern_ledger.scopes import bindings
from tavern_ledger.toolcalls.context import StoreContext
from tavern_ledger.variables import operations as variables
from tavern_runtime import pg
from tavern_runtime.migrations import MigrationSet, migrate
from tavern_runtime.provision import provision

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


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    client = await nats.connect(nats_url)
    yield client
    await client.close()


async def queued(pool: Any) -> list[str]:
    async with pool.acquire() as conn:
        return [r["subject"] for r in await conn.fetch("SELECT subject FROM ledger.outbox")]


async def test_store_facts_wait_in_the_outbox_until_the_relay_publishes_them_once(
    pool: Any, nc: Client
) -> None:
    ctx = StoreContext(pool=pool)
    written = await memory.write(ctx, MemoryWrite(session_id="s1", scope="chat", content="dry"))
    await variables.set_(ctx, VariableSet(session_id="s1", scope="chat", name="hp", value=3))
    assert written["revision"] == 1
    assert await queued(pool) == [
        "tavern.ledger.chat_1.memory.changed",
        "tavern.ledger.chat_1.variable.changed",
    ]
    relay = Relay(lambda: pool, lambda: nc)

    assert await relay.flush() == 0  # no LEDGER stream yet: the facts stay queued
    assert len(await queued(pool)) == 2

    await provision(nc.jetstream())
    assert await relay.flush() == 2
    assert await queued(pool) == []
    assert await relay.flush() == 0
    js = nc.jetstream()
    sub = await js.pull_subscribe("tavern.ledger.chat_1.>", stream=LEDGER.name)
    msgs = await sub.fetch(2, timeout=5)
    facts = [decode(m.data, LedgerFact) for m in msgs]
    assert [type(f) for f in facts] == [MemoryChanged, VariableChanged]
    assert [m.headers["Nats-Msg-Id"] for m in msgs if m.headers] == [f.id for f in facts]
    assert (await js.stream_info(LEDGER.name)).state.messages == 2


async def test_facts_left_in_the_stores_old_outbox_move_to_the_one_outbox(
    database_url: str,
) -> None:
    every = migrations()
    before = MigrationSet(every.schema, tuple(m for m in every.migrations if m.version < 8))
    pool = await pg.create_pool(database_url, max_size=2)
    try:
        await migrate(pool, before)
        async with pool.acquire() as conn:
            await conn.execute(
                "INSERT INTO ledger.store_outbox (msg_id, subject, data) VALUES "
                "('mc_1', 'tavern.ledger.chat_1.memory.changed', 'a'), "
                "('vc_1', 'tavern.ledger.chat_1.variable.changed', 'b')"
            )
        await migrate(pool, every)
        assert sorted(await queued(pool)) == [
            "tavern.ledger.chat_1.memory.changed",
            "tavern.ledger.chat_1.variable.changed",
        ]
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT to_regclass('ledger.store_outbox')") is None
    finally:
        await pool.close()
