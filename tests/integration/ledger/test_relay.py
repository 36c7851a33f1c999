"""The LEDGER outbox relay against a real JetStream: facts wait in the outbox while the stream
cannot take them, go out in commit order once it can, and a fact published twice is stored
once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from tavern_events.streams import LEDGER
from tavern_ledger import outbox
from tavern_ledger.app import migrations
from tavern_ledger.domain.facts import OutboxRecord
from tavern_ledger.relay import Relay
from tavern_runtime import pg
from tavern_runtime.migrations import migrate
from tavern_runtime.provision import provision

pytestmark = pytest.mark.integration


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Any]:
    pool = await pg.create_pool(database_url, max_size=4)
    await migrate(pool, migrations())
    yield pool
    await pool.close()


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    client = await nats.connect(nats_url)
    yield client
    await client.close()


def fact(n: int) -> OutboxRecord:
    body = json.dumps({"n": n}).encode()
    return OutboxRecord(f"ev_{n:024d}", "tavern.ledger.chat1.evidence.appended", body)


async def staged(pool: Any) -> int:
    async with pool.acquire() as conn:
        return int(await conn.fetchval("SELECT count(*) FROM ledger.outbox"))


async def test_facts_wait_until_the_stream_takes_them_then_go_out_in_order_once(
    pool: Any, nc: Client
) -> None:
    async with pool.acquire() as conn:
        await outbox.enqueue(conn, [fact(n) for n in range(300)])
    relay = Relay(lambda: pool, lambda: nc)

    assert await relay.flush() == 0  # no LEDGER stream yet: nothing answers
    assert await staged(pool) == 300

    await provision(nc.jetstream())
    assert await relay.flush() == 300
    assert await staged(pool) == 0
    async with pool.acquire() as conn:  # a crash between the ack and the delete: sent again
        await outbox.enqueue(conn, [fact(n) for n in range(10)])
    assert await relay.flush() == 10

    js = nc.jetstream()
    assert (await js.stream_info(LEDGER.name)).state.messages == 300
    sub = await js.pull_subscribe("tavern.ledger.chat1.>", stream=LEDGER.name)
    numbers = [json.loads(m.data)["n"] for m in await sub.fetch(300, timeout=5)]
    assert numbers == list(range(300))
