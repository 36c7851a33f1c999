"""Connections and provisioned streams for the runtime integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tavern_runtime.bus import NatsConnection, connect
from tavern_runtime.provision import provision
from tavern_runtime.settings import TavernSettings


class LostConnections:
    """Stands in for the process exit: counts connections that closed by themselves."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


@pytest.fixture
def lost() -> LostConnections:
    return LostConnections()


@pytest.fixture
def settings(nats_url: str) -> TavernSettings:
    return TavernSettings(nats_url=nats_url)


@pytest.fixture
async def conn(settings: TavernSettings, lost: LostConnections) -> AsyncIterator[NatsConnection]:
    connection = await connect(settings, "runtime-tests", on_lost=lost)
    yield connection
    await connection.close()
    assert lost.count == 0, "a test connection closed without being asked to"


@pytest.fixture
async def provisioned(conn: NatsConnection) -> NatsConnection:
    report = await provision(conn.js)
    assert report.ok, report.lines()
    return conn
