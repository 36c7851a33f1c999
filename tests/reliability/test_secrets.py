"""No secret in logs, events or the database, with the whole system as separate processes:

- a NATS password given inside `TAVERN_NATS_URL` (`nats://user:password@host`) to every service,
  whose logs run at INFO (every connect is logged) in JSON (tracebacks as data);
- an LLM provider (a real loopback HTTP server speaking the OpenAI format) that refuses the key
  and echoes it in its error text, with a second credential beside it;
- a service started with a wrong NATS password, which fails and logs why.

Afterwards every service log, every message of every stream (SESSIONS above all) and every row of
every table in Postgres is searched for the password, the wrong password and both keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import sys
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tavern_cli import catalog
from tavern_events import streams
from tests.integration.loop.providers.openai_server import OpenAIServer, error
from tests.reliability.driver import Driver
from tests.reliability.stack import Service, Stack
from tests.support import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

WRONG_PASSWORD = f"wrong-{secrets.token_hex(12)}"
API_KEY = f"tk-{secrets.token_hex(16)}"
"""A key no credential pattern knows: only the provider's own scrubbing can catch its echo."""
OTHER_KEY = f"sk-proj-{secrets.token_hex(20)}"
"""A key the shared credential patterns know, also in the provider's error text."""


class UrlCredentialStack(Stack):
    """The stack with each service's generated NATS login inside its `TAVERN_NATS_URL`
    (`nats://user:password@host`), the way an operator who puts credentials in the URL would."""

    def _env(self, service: Service) -> dict[str, str]:
        env = super()._env(service)
        user, password = env.pop("TAVERN_NATS_USER"), env.pop("TAVERN_NATS_PASSWORD")
        host = env["TAVERN_NATS_URL"].removeprefix("nats://")
        env["TAVERN_NATS_URL"] = f"nats://{user}:{password}@{host}"
        return env

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.nats.port}"

    def secrets(self) -> tuple[str, ...]:
        """Every password the services were given, the wrong one and both keys."""
        passwords = tuple(self.credentials.nats_password(name) for name in self.services)
        return (*passwords, WRONG_PASSWORD, API_KEY, OTHER_KEY)


@pytest.fixture
async def provider() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer() as server:
        echo = f"Incorrect API key provided: {API_KEY}. Your organisation key {OTHER_KEY} is fine."
        server.repeat = error(401, {"error": {"message": echo, "type": "invalid_request_error"}})
        yield server


@pytest.fixture
async def system(provider: OpenAIServer) -> AsyncIterator[UrlCredentialStack]:
    env = {
        "TAVERN_LOG_LEVEL": "INFO",
        "TAVERN_LLM_BASE_URL": provider.base_url,
        "TAVERN_LLM_API_KEY": API_KEY,
        "TAVERN_LLM_MAX_RETRIES": "0",
    }
    stack = UrlCredentialStack(proxied=False, env=env, auto_restart=False)
    try:
        await stack.start()
        yield stack
    except BaseException:
        print(stack.tails())
        raise
    finally:
        await stack.close()
        if not os.environ.get("TAVERN_KEEP_STACK"):
            stack.remove()


async def _wrong_password_run(stack: UrlCredentialStack, seconds: float = 8.0) -> str:
    """A ledger started with a wrong NATS password: what it printed in `seconds`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env.update(
        TAVERN_NATS_URL=f"nats://ledger:{WRONG_PASSWORD}@{stack.host}",
        TAVERN_DATABASE_URL=stack.database_url,
        TAVERN_DATA_DIR=str(stack.root / "wrong"),
        TAVERN_LOG_FORMAT="json",
        TAVERN_LOG_LEVEL="DEBUG",
        TAVERN_HEALTH_PORT="0",
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *catalog.BY_NAME["ledger"].command,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), seconds)
    if process.returncode is None:
        process.terminate()
    out, _ = await process.communicate()
    return out.decode(errors="replace")


async def _stream_texts(stack: Stack) -> dict[str, list[str]]:
    js = stack.js
    found: dict[str, list[str]] = {}
    for config in streams.ALL:
        info = await js.stream_info(config.name)
        texts = found.setdefault(config.name, [])
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            with contextlib.suppress(Exception):  # a deleted message leaves a gap
                msg = await js.get_msg(config.name, seq)
                texts.append((msg.data or b"").decode(errors="replace"))
    return found


async def _database_texts(dsn: str) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        tables = await conn.fetch(
            """SELECT table_schema, table_name FROM information_schema.tables
               WHERE table_schema NOT IN ('pg_catalog', 'information_schema')
                 AND table_type = 'BASE TABLE'"""
        )
        texts = []
        for t in tables:
            rows = await conn.fetch(
                f'SELECT t::text AS row FROM "{t["table_schema"]}"."{t["table_name"]}" t'
            )
            texts += [r["row"] for r in rows]
        return texts
    finally:
        await conn.close()


def _leaks(stack: UrlCredentialStack, texts: list[str]) -> list[str]:
    return [s for s in stack.secrets() if any(s in t for t in texts)]


async def test_no_secret_reaches_logs_events_or_the_database(
    system: UrlCredentialStack, provider: OpenAIServer
) -> None:
    assert system.nc is not None
    driver = Driver(system.nc)
    await driver.open()
    sent = await driver.say("secrets-s1", "hello there")
    assert await driver.wait(sent, 60), system.tails()
    assert sent.outcome == "failed"
    assert await driver.stored(sent)
    assert provider.requests, "the loop never asked the provider"
    wrong = await _wrong_password_run(system)
    await driver.close()

    events = await _stream_texts(system)
    [end] = [e for e in events[streams.SESSIONS.name] if '"turn/end"' in e]
    error = json.loads(end)["payload"]["error"]
    assert "[redacted:api_key]" in error["message"], error  # the echo was there, and scrubbed
    assert "[redacted:openai_key]" in error["message"], error

    async def projected() -> bool:  # the failed turn reached the read models
        rows = await _database_texts(system.database_url)
        return any("secrets-s1" in r for r in rows)

    await eventually(projected, timeout=30)
    logs = {p.name: p.read_text(errors="replace") for p in system.logs.glob("*.log")}
    assert all('"service_started"' in text for text in logs.values()), "every service logged"
    connected = [
        json.loads(line) for line in logs["loop.log"].splitlines() if "nats_connected" in line
    ]
    assert connected, "the loop logs its connect at INFO"
    assert {c["server"] for c in connected} == {system.host}
    assert "Authorization" in wrong, wrong[-2000:]  # it did try, and said why it failed

    assert _leaks(system, [*logs.values(), wrong]) == [], "a secret in a service log"
    streamed = [t for texts in events.values() for t in texts]
    assert _leaks(system, streamed) == [], "a secret in a stream"
    assert _leaks(system, await _database_texts(system.database_url)) == [], "in Postgres"
