"""`tavern init` and `tavern serve` against given servers, as compose and Kubernetes run them."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import nats
import pytest

from tavern_events import subjects
from tavern_runtime.embedded import free_port
from tests.support import eventually

pytestmark = pytest.mark.e2e

TAVERN = str(Path(sys.executable).parent / "tavern")


def _env(tmp_path: Path, nats_url: str, database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env.update(
        TAVERN_NATS_URL=nats_url,
        TAVERN_DATABASE_URL=database_url,
        TAVERN_DATA_DIR=str(tmp_path / "data"),
        TAVERN_SHUTDOWN_GRACE_S="5",
    )
    return env


async def _tavern(env: dict[str, str], *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        TAVERN, *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    output, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, output.decode(errors="replace")


async def test_init_is_idempotent_and_fails_on_drift_until_applied(
    tmp_path: Path, nats_url: str, database_url: str
) -> None:
    env = _env(tmp_path, nats_url, database_url)
    code, first = await _tavern(env, "init")
    assert code == 0, first
    assert "created    stream SESSIONS" in first
    assert "migrated   schema ledger 0 -> " in first

    code, second = await _tavern(env, "init")
    assert code == 0, second
    assert "created" not in second
    assert "unchanged  schema projector at version" in second

    await _drift_sessions_max_age(nats_url)
    code, drifted = await _tavern(env, "init")
    assert code == 1, drifted
    assert "drift      stream SESSIONS: max_age" in drifted
    code, applied = await _tavern(env, "init", "--apply-drift")
    assert code == 0, applied
    assert "updated    stream SESSIONS" in applied


async def _drift_sessions_max_age(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        config = (await js.stream_info("SESSIONS")).config
        config.max_age = 3600
        await js.update_stream(config)
    finally:
        await nc.close()


async def test_serve_runs_one_service_until_sigterm(
    tmp_path: Path, nats_url: str, database_url: str
) -> None:
    env = _env(tmp_path, nats_url, database_url)
    assert (await _tavern(env, "init"))[0] == 0
    serve = await asyncio.create_subprocess_exec(
        TAVERN,
        "serve",
        "ledger",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        reply = await eventually(lambda: _ping(nats_url, "ledger"), timeout=30, interval=0.2)
        assert reply["service"] == "ledger"
        health = tmp_path / "data" / "run" / "ledger.health"
        assert json.loads(health.read_text())["pid"] == serve.pid
        serve.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(serve.wait(), 20) == 0
        assert not health.exists()
    finally:
        if serve.returncode is None:
            serve.kill()
            await serve.wait()
    assert serve.stderr is not None
    logs = (await serve.stderr.read()).decode()
    assert "service_stopped" in logs


async def _ping(nats_url: str, service: str) -> dict[str, object] | None:
    nc = await nats.connect(nats_url)
    try:
        reply = await nc.request(subjects.rpc(service, "ping"), b"", timeout=1)
    except Exception:  # no responder yet
        return None
    finally:
        await nc.close()
    body: dict[str, object] = json.loads(reply.data)
    return body


async def test_status_and_init_fail_fast_and_say_why_without_servers(tmp_path: Path) -> None:
    dead_nats = f"nats://127.0.0.1:{free_port()}"
    dead_pg = f"postgresql://tavern:hunter2@127.0.0.1:{free_port()}/tavern"
    env = _env(tmp_path, dead_nats, dead_pg)
    code, status = await _tavern(env, "status")
    assert code == 1
    assert f"cannot reach NATS at {dead_nats}" in status
    assert "not all green" in status
    assert "hunter2" not in status
    code, init = await _tavern(env, "init")
    assert code == 1
    assert "cannot reach NATS" in init
