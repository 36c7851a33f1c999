"""A service whose NATS connection closes for good exits non-zero."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from faststream import FastStream
from faststream.nats import NatsBroker

from tavern_runtime.embedded import EmbeddedNats
from tavern_runtime.service import EXIT_CONNECTION_LOST, serve
from tavern_runtime.settings import TavernSettings
from tests.support import eventually

pytestmark = pytest.mark.integration


async def test_serve_exits_non_zero_when_the_connection_closes_for_good(
    tmp_path: Path, nats_server: EmbeddedNats
) -> None:
    # A broker that gives up after one reconnect (bus.build_broker never does; this one
    # stands in for any connection that nats-py closes for good, e.g. revoked credentials).
    # faststream and nats-py annotate reconnect_time_wait as int, but nats-py sleeps it as
    # seconds: a tenth of one keeps the test quick.
    broker = NatsBroker(
        nats_server.url_as("operator"),
        max_reconnect_attempts=1,
        reconnect_time_wait=0.1,  # type: ignore[arg-type]
    )
    settings = TavernSettings(
        nats_url=nats_server.url_as("operator"), data_dir=tmp_path, health_port=0
    )
    task = asyncio.create_task(serve("probe", FastStream(broker), settings, stop=asyncio.Event()))
    await eventually(lambda: broker._connection is not None and broker._connection.is_connected)
    nats_server.kill()
    assert await asyncio.wait_for(task, 20) == EXIT_CONNECTION_LOST
