"""Helpers for running one service in process against the real servers of the harness."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import nats
import pytest

from tavern_cli import catalog
from tavern_consolidator.config import ConsolidatorSettings
from tavern_ledger.config import LedgerSettings
from tavern_loop.config import LoopSettings
from tavern_projector.config import ProjectorSettings
from tavern_runtime.health import health_file
from tavern_runtime.provision import provision
from tavern_runtime.service import serve
from tavern_runtime.settings import TavernSettings
from tests.support import eventually, over_tcp, tcp_address

SETTINGS: dict[str, type[TavernSettings]] = {
    "loop": LoopSettings,
    "ledger": LedgerSettings,
    "consolidator": ConsolidatorSettings,
    "projector": ProjectorSettings,
}


@pytest.fixture
async def provisioned_nats(nats_url: str) -> str:
    """A JetStream server with the contract's streams and buckets."""
    nc = await nats.connect(nats_url)
    try:
        await provision(nc.jetstream())
    finally:
        await nc.close()
    return nats_url


def settings_for(name: str, data_dir: Path, nats_url: str, database_url: str) -> TavernSettings:
    return SETTINGS[name](
        nats_url=nats_url,
        database_url=database_url,
        data_dir=data_dir,
        health_port=0,
        shutdown_grace_s=5,
        log_format="console",
    )


@dataclass
class Running:
    name: str
    settings: TavernSettings
    stop: asyncio.Event
    task: asyncio.Task[int]
    health_url: str


@contextlib.asynccontextmanager
async def running_service(
    name: str, settings: TavernSettings, *, wait_ready: bool = True
) -> AsyncIterator[Running]:
    """The service's real app served as `python -m tavern_<name>` would, minus the signals.

    Yields once `/readyz` answers 200 (or, with `wait_ready=False`, once the probes listen)."""
    app = catalog.BY_NAME[name].app().build_app(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(name, app, settings, stop=stop))
    record = health_file(settings.data_dir, name)
    try:
        await eventually(record.exists, timeout=10)
        url = str(json.loads(record.read_text())["url"])
        if wait_ready:
            await eventually(lambda: _ready(url, task), timeout=20, interval=0.1)
        yield Running(name, settings, stop, task, url)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.shield(task), 30)


async def _ready(url: str, task: asyncio.Task[int]) -> bool:
    assert not task.done(), f"the service exited with {task.result()} before it was ready"
    async with httpx.AsyncClient(timeout=5) as client:
        return (await client.get(f"{url}/readyz")).status_code == 200


class TcpProxy:
    """A loopback TCP proxy that can be cut: the network partition between a service and
    Postgres, without stopping the run's shared Postgres."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    def rewrite(self, dsn: str) -> str:
        return over_tcp(dsn, "127.0.0.1", self.port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self._writers |= {writer, up_writer}
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()


@pytest.fixture
async def pg_proxy(database_url: str) -> AsyncIterator[TcpProxy]:
    proxy = TcpProxy(*tcp_address(database_url))
    await proxy.start()
    yield proxy
    await proxy.cut()
