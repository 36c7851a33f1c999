"""Embedded mode is secure by default: PostgreSQL takes password logins only and gives each
service a role of its own that reaches its own schema alone; an old, trusting data dir is
upgraded in place by `tavern up` with every session and memory kept."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import asyncpg
import httpx
import nats
import pytest

from tavern_cli import catalog, demo, initialise, secure
from tavern_runtime.credentials import DB_ROLES, Credentials, load_or_create
from tavern_runtime.dbroles import role_dsn
from tavern_runtime.embedded import EmbeddedNats, EmbeddedPostgres, free_ports
from tavern_runtime.service import serve
from tavern_runtime.settings import TavernSettings
from tests.deploy.test_nats_permissions import _settings_class
from tests.support import eventually, passwordless_logins

pytestmark = pytest.mark.integration

TAVERN = str(Path(sys.executable).parent / "tavern")


@pytest.fixture
def root() -> Iterator[Path]:
    """Outside pytest's temp root: as root, postgres runs as another user that must traverse."""
    path = Path(tempfile.mkdtemp(prefix="tavern-sec-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def credentials(root: Path) -> Credentials:
    return load_or_create(root / "data")


@pytest.fixture
async def secured_postgres(root: Path, credentials: Credentials) -> AsyncIterator[EmbeddedPostgres]:
    server = secure.embedded_postgres(root / "data" / "postgres", credentials)
    server.start()
    try:
        await initialise.migrate_all(server.dsn, secure.role_passwords(credentials))
        yield server
    finally:
        server.stop()


def _hba_methods(pgdata: Path) -> set[str]:
    """The authentication methods pg_hba.conf names (its rules, not its comments)."""
    lines = (pgdata / "pg_hba.conf").read_text().splitlines()
    return {line.split()[-1] for line in lines if line.strip() and not line.startswith("#")}


def _url(server: EmbeddedPostgres, user: str, password: str | None = None) -> str:
    secret = f":{password}" if password is not None else ""
    return f"postgresql://{user}{secret}@127.0.0.1:{server.port}/tavern"


async def test_credentials_file_is_private_and_reused(root: Path) -> None:
    first = load_or_create(root / "data")
    assert (root / "data" / "credentials.json").stat().st_mode & 0o777 == 0o600
    assert (root / "data").stat().st_mode & 0o066 == 0
    assert load_or_create(root / "data") == first
    assert len(set(first.nats.values())) == len(first.nats)  # a password per user
    assert "loop" not in first.postgres  # the loop keeps no tables: no database login
    assert set(first.postgres) == {"postgres", *DB_ROLES}
    assert first.nats["operator"] not in repr(first)


async def test_every_login_needs_its_password(secured_postgres: EmbeddedPostgres) -> None:
    for user in ("postgres", *DB_ROLES):
        for attempt in (None, "", "wrong-password"):
            with pytest.raises(asyncpg.PostgresError, match="password"):
                await asyncpg.connect(_url(secured_postgres, user, attempt), password=attempt)
    with pytest.raises(asyncpg.PostgresError):
        await asyncpg.connect(_url(secured_postgres, "loop", "x"))
    assert _hba_methods(secured_postgres.pgdata) == {"scram-sha-256"}
    assert secured_postgres.data_dir.stat().st_mode & 0o077 == 0


async def test_each_service_role_reaches_its_own_schema_only(
    secured_postgres: EmbeddedPostgres, credentials: Credentials
) -> None:
    admin = secured_postgres.dsn
    for role in DB_ROLES:
        conn = await asyncpg.connect(role_dsn(admin, role, credentials.db_password(role)))
        try:
            assert await conn.fetchval(f"SELECT count(*) FROM {role}.schema_version") > 0
            owners = await conn.fetch(
                "SELECT DISTINCT pg_get_userbyid(c.relowner) AS owner FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1",
                role,
            )
            assert [r["owner"] for r in owners] == [role]
            for other in DB_ROLES:
                if other == role:
                    continue
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await conn.fetch(f"SELECT * FROM {other}.schema_version")
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await conn.execute(f"CREATE TABLE {other}.planted (x int)")
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute("CREATE TABLE public.planted (x int)")
            assert not await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = $1", role)
        finally:
            await conn.close()


async def test_migrations_run_again_as_the_roles(
    secured_postgres: EmbeddedPostgres, credentials: Credentials
) -> None:
    """A second run (the next `tavern up`) finds every schema current and changes nothing."""
    reports = await initialise.migrate_all(secured_postgres.dsn, secure.role_passwords(credentials))
    assert reports
    assert not any(r.changed for r in reports)


# --- upgrading a data dir made by the previous release --------------------------------------------


@asynccontextmanager
async def _old_services(nats_url: str, dsn: str, work: Path) -> AsyncIterator[None]:
    """The four services as the previous release ran them: no NATS user, the superuser DSN."""
    stop = asyncio.Event()
    runs, ports = [], {}
    picked = iter(free_ports(len(catalog.SERVICES)))
    for entry in catalog.SERVICES:
        ports[entry.name] = next(picked)
        settings = _settings_class(entry.name)(
            nats_url=nats_url,
            database_url=dsn,
            health_port=ports[entry.name],
            data_dir=work / entry.name,
            shutdown_grace_s=2,
        )
        runs.append(
            asyncio.create_task(serve(entry.name, entry.app().build_app(settings), settings, stop))
        )
    try:
        for port in ports.values():
            await eventually(partial(_ready, port), timeout=30, interval=0.2)
        yield
    finally:
        stop.set()
        await asyncio.gather(*runs)


async def _ready(port: int) -> bool:
    async with httpx.AsyncClient() as http:
        try:
            response = await http.get(f"http://127.0.0.1:{port}/readyz", timeout=2)
        except httpx.HTTPError:
            return False
    return response.status_code == 200


async def _stored(dsn: str) -> dict[str, int]:
    conn = await asyncpg.connect(dsn)
    try:
        return {
            table: int(await conn.fetchval(f"SELECT count(*) FROM {table}"))
            for table in (
                "ledger.memory",
                "ledger.evidence",
                "ledger.session_binding",
                "projector.sessions",
                "projector.chats",
                "consolidator.session",
            )
        }
    finally:
        await conn.close()


async def _sessions_log(nats_url: str, **login: str) -> list[bytes]:
    nc = await nats.connect(nats_url, **login)
    try:
        js = nc.jetstream()
        info = await js.stream_info("SESSIONS")
        found = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                found.append((await js.get_msg("SESSIONS", seq)).data or b"")
            except Exception as exc:
                raise AssertionError(f"seq {seq} of {info.state}: {exc!r}") from exc
        return found
    finally:
        await nc.close()


async def _make_old_data_dir(data: Path) -> tuple[list[bytes], dict[str, int], str]:
    """What the previous `tavern up` left: nats-server without users, Postgres with `trust`,
    the schemas owned by the superuser, and a conversation with a memory in it."""
    nats_server = EmbeddedNats(data / "nats")
    postgres = EmbeddedPostgres(data / "postgres")
    nats_server.start()
    postgres.start()
    try:
        old_dsn = postgres.dsn
        assert ":" not in old_dsn.split("//")[1].split("@")[0]  # no password: trust
        nc = await nats.connect(nats_server.url)
        try:
            assert (await initialise.provision_all(nc, 1, False)).ok
        finally:
            await nc.close()
        await initialise.migrate_all(old_dsn)
        async with _old_services(nats_server.url, old_dsn, data / "work"):
            result = await demo.play(nats_server.url, out=io.StringIO(), colour=False)
            assert result.outcomes == ("completed",) * len(demo.SCRIPT)
            await eventually(lambda: _has_memory(old_dsn), timeout=20)
            await asyncio.sleep(1)  # let the projections catch up with the last turn
        log, rows = await _sessions_log(nats_server.url), await _stored(old_dsn)
    finally:
        postgres.stop()
        nats_server.stop()
    return log, rows, result.session_id


async def _has_memory(dsn: str) -> bool:
    return (await _stored(dsn))["ledger.memory"] > 0


def _env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env.update(TAVERN_DATA_DIR=str(data), TAVERN_SHUTDOWN_GRACE_S="5")
    return env


async def test_up_upgrades_an_old_trusting_data_dir_keeping_every_session_and_memory(
    root: Path,
) -> None:
    data = root / "data"
    log, rows, session_id = await _make_old_data_dir(data)
    assert rows["ledger.memory"] > 0
    assert rows["projector.sessions"] > 0
    assert "trust" in _hba_methods(data / "postgres" / "pgdata")

    out = root / "up.log"
    with out.open("ab") as sink:
        up = await asyncio.create_subprocess_exec(
            TAVERN, "up", "--no-demo", env=_env(data), stdout=sink, stderr=sink
        )
    try:
        servers = await eventually(lambda: _servers(data), timeout=60, interval=0.5)
        credentials = json.loads((data / "credentials.json").read_text())
        status = await eventually(lambda: _status_green(data), timeout=60, interval=0.5)
        assert "all green" in status
        operator = {"user": "operator", "password": credentials["nats"]["operator"]}
        assert await _sessions_log(servers["nats_url"], **operator) == log
        with pytest.raises(Exception, match=r"(?i)authorization"):
            await nats.connect(  # anonymous: refused now
                servers["nats_url"], allow_reconnect=False, max_reconnect_attempts=1
            )
        admin = servers["database_url"]
        assert await _stored(admin) == rows
        for login in passwordless_logins(admin):
            with pytest.raises(asyncpg.PostgresError, match="password"):
                await asyncpg.connect(login, password="")
        ledger = role_dsn(admin, "ledger", credentials["postgres"]["ledger"])
        conn = await asyncpg.connect(ledger)
        try:
            texts = [r["content"] for r in await conn.fetch("SELECT content FROM ledger.memory")]
            assert any("Nautilus" in str(t) for t in texts)
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.fetch("SELECT * FROM projector.sessions")
        finally:
            await conn.close()
        assert session_id.encode() in b"".join(log)
    except BaseException:
        sys.stderr.write(out.read_text(errors="replace")[-6000:])
        raise
    finally:
        up.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(up.wait(), 40)
        except TimeoutError:
            up.kill()
            await up.wait()
    assert up.returncode == 0
    assert _hba_methods(data / "postgres" / "pgdata") == {"scram-sha-256"}


def _servers(data: Path) -> dict[str, str] | None:
    try:
        loaded: dict[str, str] = json.loads((data / "run" / "servers.json").read_text())
    except (OSError, ValueError):
        return None
    return loaded


async def _status_green(data: Path) -> str | None:
    status = await asyncio.create_subprocess_exec(
        TAVERN,
        "status",
        env=_env(data),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await status.communicate()
    return output.decode(errors="replace") if status.returncode == 0 else None


def test_settings_default_gives_no_database(tmp_path: Path) -> None:
    """The loop's settings need no database: `tavern up` hands it an empty DSN."""
    env = secure.service_env("loop", Credentials.generate(), admin_dsn="postgresql://a@b/c")
    assert env["TAVERN_DATABASE_URL"] == ""
    assert _settings_class("loop")(database_url="").database_url == ""
    assert isinstance(_settings_class("loop")(), TavernSettings)
