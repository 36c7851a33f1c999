"""The real-server harness: one nats-server and one PostgreSQL per test run, on free ports.

Set TAVERN_TEST_NATS_URL / TAVERN_TEST_DATABASE_URL to use servers of your own instead.
Each test that asks for `nats_url` gets its own fresh nats-server (they start in ~60 ms), and
each test that asks for `database_url` gets a fresh database, dropped afterwards.

The servers run with authentication on, as `tavern up` runs them: nats-server with the users
of deploy/nats/accounts.conf and generated passwords (`nats_url` logs in as the operator),
PostgreSQL with scram-sha-256 (the DSNs carry the superuser's generated password).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tavern_cli import secure
from tavern_runtime import pg
from tavern_runtime.credentials import Credentials
from tavern_runtime.embedded import EmbeddedNats
from tests.support import TEST_AUTH_KEY

warnings.filterwarnings("ignore", module="platformdirs")
os.environ.setdefault("TAVERN_AUTH_KEY", TEST_AUTH_KEY)
"""Every service a test starts, in process or as a process, checks principals with this key."""


@pytest.fixture(scope="session")
def run_dir() -> Iterator[Path]:
    """Outside pytest's temp root: as root, postgres runs as another user that must traverse
    the path, and a new pytest session resets its root to mode 0700."""
    path = Path(tempfile.mkdtemp(prefix="tavern-test-run-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def credentials() -> Credentials:
    """The generated logins of this run's servers."""
    return Credentials.generate()


@pytest.fixture(scope="session")
def postgres_server(run_dir: Path, credentials: Credentials) -> Iterator[str]:
    """DSN of the run's PostgreSQL (its `tavern` database is not used by tests directly)."""
    external = os.environ.get("TAVERN_TEST_DATABASE_URL")
    if external:
        asyncio.run(_template(external))
        yield external
        return
    server = secure.embedded_postgres(run_dir / "postgres", credentials)
    server.start()
    try:
        asyncio.run(_template(server.dsn))
        yield server.dsn
    finally:
        server.stop()


TEMPLATE = "tavern_test_template"
"""What each test's database is made from: an empty database with the extensions the services'
schemas use, created as `tavern init` / `tavern up` create them (as the administrator)."""


async def _template(server_dsn: str) -> None:
    import asyncpg

    from tavern_cli import catalog
    from tavern_runtime.dbroles import ensure_extensions

    admin = await asyncpg.connect(server_dsn)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{TEMPLATE}" TEMPLATE template0')
    finally:
        await admin.close()
    await ensure_extensions(pg.with_database(server_dsn, TEMPLATE), catalog.all_extensions())


@pytest.fixture
async def database_url(postgres_server: str) -> AsyncIterator[str]:
    """A fresh, empty database for this test only (with the extensions `tavern up` creates)."""
    import asyncpg

    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(postgres_server)
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
    finally:
        await admin.close()
    yield pg.with_database(postgres_server, name)
    admin = await asyncpg.connect(postgres_server)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture
def nats_server(tmp_path: Path, credentials: Credentials) -> Iterator[EmbeddedNats]:
    """A fresh JetStream server (embedded config: `sync_interval: always`, the users of
    deploy/nats/accounts.conf) for this test."""
    server = secure.embedded_nats(tmp_path / "nats", credentials)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def nats_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """URL of a JetStream server with no tavern streams on it."""
    external = os.environ.get("TAVERN_TEST_NATS_URL")
    if external:
        await _clear_tavern_streams(external)
        yield external
        return
    server: EmbeddedNats = request.getfixturevalue("nats_server")
    yield server.url_as("operator")


async def _clear_tavern_streams(url: str) -> None:
    """On a bring-your-own test server: delete the streams and buckets a previous test left."""
    import nats

    from tavern_events import streams

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        for name in [s.name for s in streams.ALL] + ["KV_tavern_leases"]:
            try:
                await js.delete_stream(name)
            except Exception:
                await asyncio.sleep(0)
    finally:
        await nc.close()
