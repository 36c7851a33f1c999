"""Connections: named, unlimited reconnects, loud on an unasked close; the broker nacks."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

import pytest
from faststream.nats import JStream, PullSub

from tavern_runtime.bus import build_broker, connect
from tavern_runtime.embedded import EmbeddedNats
from tavern_runtime.provision import ConsumerSpec, provision
from tavern_runtime.settings import TavernSettings
from tests.integration.runtime.conftest import LostConnections
from tests.support import eventually

pytestmark = pytest.mark.integration


def connection_names(server: EmbeddedNats) -> list[str]:
    with urllib.request.urlopen(f"{server.monitor_url}/connz", timeout=2) as response:
        return [c.get("name", "") for c in json.load(response)["connections"]]


async def test_connection_is_named_and_reconnects_forever(
    settings: TavernSettings, nats_server: EmbeddedNats, lost: LostConnections
) -> None:
    conn = await connect(settings, "loop-7", on_lost=lost)
    try:
        assert "loop-7" in await asyncio.to_thread(connection_names, nats_server)
        assert conn.nc.options["max_reconnect_attempts"] == -1
        nats_server.stop()
        await eventually(lambda: conn.nc.is_reconnecting, timeout=5)
        nats_server.start()
        await eventually(lambda: conn.nc.is_connected, timeout=10)
        assert await conn.js.account_info()
    finally:
        await conn.close()
    assert lost.count == 0


async def test_unasked_close_is_treated_as_a_lost_connection(
    settings: TavernSettings, lost: LostConnections
) -> None:
    conn = await connect(settings, "victim", on_lost=lost)
    await conn.nc.close()  # not through conn.close(): as when the client gives up by itself
    assert lost.count == 1


async def test_asked_close_is_not_a_loss(settings: TavernSettings, lost: LostConnections) -> None:
    conn = await connect(settings, "polite", on_lost=lost)
    await conn.close()
    assert conn.nc.is_closed
    assert lost.count == 0


async def test_broker_nacks_a_failing_handler_until_max_deliver(
    settings: TavernSettings, lost: LostConnections
) -> None:
    conn = await connect(settings, "setup", on_lost=lost)
    spec = ConsumerSpec("worker", "INPUTS", ("tavern.input.>",), max_deliver=3, ack_wait_s=5)
    await provision(conn.js, consumers=[spec])
    deliveries: list[int] = []
    broker = build_broker(settings, "worker", on_lost=lost)

    async def fail(body: Any) -> None:
        deliveries.append(1)
        raise RuntimeError("handler bug")

    broker.subscriber(
        "tavern.input.>",
        stream=JStream("INPUTS", declare=False),
        durable="worker",
        pull_sub=PullSub(batch_size=1, timeout=0.2),
    )(fail)

    async with broker:
        await broker.start()
        await conn.js.publish("tavern.input.s1.message", b"{}")
        await eventually(lambda: len(deliveries) == 3)  # nack: redelivered at once, not dropped
        info = await conn.js.consumer_info("INPUTS", "worker")
        assert info.num_redelivered == 1
    await conn.close()
    assert lost.count == 0  # the broker's own stop is not a lost connection
