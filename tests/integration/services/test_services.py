"""Each service, in process against real NATS and Postgres: it migrates its schema, answers
ping over the bus, and reports readiness and metrics over HTTP."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import asyncpg
import httpx
import nats
import pytest

from tavern_cli import catalog
from tavern_events import subjects
from tavern_runtime import pg
from tavern_runtime.embedded import free_port
from tavern_runtime.migrations import migrate
from tavern_runtime.service import serve
from tests.integration.services.conftest import TcpProxy, running_service, settings_for
from tests.support import eventually, has_samples

pytestmark = pytest.mark.integration

DATABASE_SERVICES = ["ledger", "consolidator", "projector"]


async def _ping(nats_url: str, service: str) -> dict[str, object]:
    nc = await nats.connect(nats_url)
    try:
        reply = await nc.request(subjects.rpc(service, "ping"), b"", timeout=5)
    finally:
        await nc.close()
    body: dict[str, object] = json.loads(reply.data)
    return body


async def _get(url: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.get(url)


async def _schema_version(database_url: str, schema: str) -> list[int]:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(f"SELECT version FROM {schema}.schema_version ORDER BY version")
    finally:
        await conn.close()
    return [r["version"] for r in rows]


@pytest.mark.parametrize("service", DATABASE_SERVICES)
async def test_database_service_migrates_answers_ping_and_is_ready(
    service: str, tmp_path: Path, provisioned_nats: str, database_url: str
) -> None:
    settings = settings_for(service, tmp_path, provisioned_nats, database_url)
    latest = catalog.BY_NAME[service].migrations().latest  # type: ignore[union-attr]
    async with running_service(service, settings) as svc:
        assert await _schema_version(database_url, service) == list(range(1, latest + 1))
        assert await _ping(provisioned_nats, service) == {
            "service": service,
            "version": "0.1.0",
            "ok": True,
        }
        ready = await eventually(lambda: _ready(svc.health_url), timeout=10)
        assert ready["checks"] == {"nats": "ok", "postgres": "ok"}
    assert svc.task.result() == 0
    assert not (tmp_path / "run" / f"{service}.health").exists()


async def test_loop_runs_on_the_bus_alone(tmp_path: Path, provisioned_nats: str) -> None:
    settings = settings_for("loop", tmp_path, provisioned_nats, "")
    async with running_service("loop", settings) as svc:
        assert (await _ping(provisioned_nats, "loop"))["service"] == "loop"
        ready = await eventually(lambda: _ready(svc.health_url), timeout=10)
        assert ready["checks"] == {"nats": "ok"}
    assert svc.task.result() == 0


async def _ready(url: str) -> dict[str, object] | None:
    response = await _get(f"{url}/readyz")
    body: dict[str, object] = response.json()
    return body if response.status_code == 200 else None


async def test_readyz_is_503_when_postgres_becomes_unreachable(
    tmp_path: Path, provisioned_nats: str, database_url: str, pg_proxy: TcpProxy
) -> None:
    settings = settings_for("ledger", tmp_path, provisioned_nats, pg_proxy.rewrite(database_url))
    async with running_service("ledger", settings) as svc:
        await eventually(lambda: _ready(svc.health_url), timeout=10)
        await pg_proxy.cut()

        async def not_ready() -> dict[str, object] | None:
            response = await _get(f"{svc.health_url}/readyz")
            return response.json() if response.status_code == 503 else None

        body = await eventually(not_ready, timeout=10)
        assert body["checks"]["nats"] == "ok"  # type: ignore[index]
        assert body["checks"]["postgres"].startswith("Postgres:")  # type: ignore[index]
        assert (await _get(f"{svc.health_url}/healthz")).status_code == 200


async def test_readyz_is_503_while_a_stream_is_missing(tmp_path: Path, nats_url: str) -> None:
    # The loop has no JetStream subscriber that would fail its start, so it runs and answers
    # ping, but it is not ready while its streams are not provisioned.
    settings = settings_for("loop", tmp_path, nats_url, "")  # nothing provisioned
    async with running_service("loop", settings, wait_ready=False) as svc:
        await eventually(lambda: _ping(nats_url, "loop"), timeout=10)
        response = await _get(f"{svc.health_url}/readyz")
        assert response.status_code == 503
        assert "stream SESSIONS does not exist" in response.json()["checks"]["nats"]


async def test_metrics_count_handled_requests(
    tmp_path: Path, provisioned_nats: str, database_url: str
) -> None:
    settings = settings_for("projector", tmp_path, provisioned_nats, database_url)
    async with running_service("projector", settings) as svc:
        for _ in range(3):
            await _ping(provisioned_nats, "projector")
        text = (await _get(f"{svc.health_url}/metrics")).text
    ok = 'tavern_messages_handled_total{service="projector",handler="Ping",outcome="ok"} 3'
    assert has_samples(text, [ok])
    assert has_samples(text, ['tavern_handler_seconds_count{service="projector",handler="Ping"} 3'])


async def test_service_refuses_a_schema_newer_than_its_code(
    tmp_path: Path, provisioned_nats: str, database_url: str
) -> None:
    ledger = catalog.BY_NAME["ledger"]
    pool = await pg.create_pool(database_url)
    try:
        report = await migrate(pool, ledger.migrations())  # type: ignore[arg-type]
        await pool.execute(
            "INSERT INTO ledger.schema_version VALUES ($1, 'next', now(), 'x')", report.after + 1
        )
    finally:
        await pool.close()
    settings = settings_for("ledger", tmp_path, provisioned_nats, database_url)
    app = ledger.app().build_app(settings)
    assert await serve("ledger", app, settings, stop=asyncio.Event()) == 1


async def test_stop_while_nats_is_unreachable_ends_the_start(tmp_path: Path) -> None:
    dead = f"nats://127.0.0.1:{free_port()}"
    settings = settings_for("loop", tmp_path, dead, "")
    app = catalog.BY_NAME["loop"].app().build_app(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(serve("loop", app, settings, stop=stop))
    await eventually(lambda: (tmp_path / "run" / "loop.health").exists(), timeout=10)
    stop.set()
    assert await asyncio.wait_for(task, 10) == 0
