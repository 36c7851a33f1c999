"""The gateway's real app in process against the harness's nats-server and PostgreSQL, spoken
to over ASGI (httpx) with its lifespan running: pool, migrations and bus as in production."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
import uvicorn
from fastapi import FastAPI

from tavern_gateway.app import build_app
from tavern_gateway.config import GatewaySettings
from tavern_runtime.provision import provision

PASSWORD = "a-long-enough-password"


def gateway_settings(
    data_dir: Path, nats_url: str, database_url: str, **more: Any
) -> GatewaySettings:
    return GatewaySettings(
        nats_url=nats_url,
        database_url=database_url,
        data_dir=data_dir,
        health_port=0,
        gateway_port=0,
        log_format="json",
        **more,
    )


@pytest.fixture
async def provisioned(nats_url: str) -> str:
    nc = await nats.connect(nats_url)
    try:
        await provision(nc.jetstream())
    finally:
        await nc.close()
    return nats_url


@contextlib.asynccontextmanager
async def running(settings: GatewaySettings) -> AsyncIterator[FastAPI]:
    app = build_app(settings)
    async with app.router.lifespan_context(app):
        yield app


class Browser:
    """One browser's cookies over ASGI, from `client_host`, sending the pages' CSRF header."""

    def __init__(self, app: FastAPI, client_host: str = "127.0.0.1") -> None:
        transport = httpx.ASGITransport(app=app, client=(client_host, 50000))
        self.http = httpx.AsyncClient(
            transport=transport, base_url="http://testserver", follow_redirects=True
        )

    async def open(self) -> Browser:
        await self.http.get("/login")  # sets the CSRF cookie
        return self

    async def post(self, path: str, body: Any = None) -> httpx.Response:
        headers = {"X-CSRF-Token": self.http.cookies.get("tavern_csrf") or ""}
        return await self.http.post(path, json=body, headers=headers)

    async def close(self) -> None:
        await self.http.aclose()


@pytest.fixture
async def gateway(tmp_path: Path, provisioned: str, database_url: str) -> AsyncIterator[FastAPI]:
    async with running(gateway_settings(tmp_path, provisioned, database_url)) as app:
        yield app


@pytest.fixture
async def owner(gateway: FastAPI) -> AsyncIterator[Browser]:
    browser = await Browser(gateway).open()
    created = await browser.post("/api/setup", {"name": "olga", "password": PASSWORD})
    assert created.status_code == 200, created.text
    yield browser
    await browser.close()


@contextlib.asynccontextmanager
async def served(tmp_path: Path, nats_url: str, database_url: str) -> AsyncIterator[str]:
    """The gateway served by uvicorn on a loopback port in this process: its base URL."""
    app = build_app(gateway_settings(tmp_path, nats_url, database_url))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            assert not task.done(), "the gateway stopped before it served"
            await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)
