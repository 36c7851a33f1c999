"""`tavern up` the way a user runs it: servers and four service processes, `tavern status`
green, Ctrl-C stops everything, and a second `tavern up` on the same dir has all the data."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import nats
import pytest

from tavern_cli.rundir import pid_alive
from tests.support import eventually, passwordless_logins

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TAVERN = str(Path(sys.executable).parent / "tavern")
SERVICES = ("loop", "ledger", "consolidator", "projector")
OWNED = (*SERVICES, "gateway")
"""Every process `tavern up` supervises: the services and the web app."""


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env["TAVERN_DATA_DIR"] = str(data_dir)
    env["TAVERN_SHUTDOWN_GRACE_S"] = "5"
    return env


@asynccontextmanager
async def tavern_up(data_dir: Path, log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    with log.open("ab") as out:
        up = await asyncio.create_subprocess_exec(
            TAVERN, "up", "--no-demo", env=_env(data_dir), stdout=out, stderr=out
        )
    try:
        yield up
    finally:
        if up.returncode is None:  # a failed test: stop it properly, so nothing is orphaned
            up.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(up.wait(), 40)
            except TimeoutError:
                up.kill()
                await up.wait()


async def _status(data_dir: Path) -> tuple[int, str]:
    status = await asyncio.create_subprocess_exec(
        TAVERN,
        "status",
        env=_env(data_dir),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await status.communicate()
    assert status.returncode is not None
    return status.returncode, output.decode(errors="replace")


async def _green(data_dir: Path) -> bool:
    code, _ = await _status(data_dir)
    return code == 0


def _pids(data_dir: Path) -> dict[str, int]:
    """Every process `tavern up` owns: the services, the web app, nats-server and the
    postmaster."""
    pids = {s: json.loads((data_dir / "run" / f"{s}.health").read_text())["pid"] for s in OWNED}
    pids["nats-server"] = int((data_dir / "nats" / "pid").read_text())
    postmaster = data_dir / "postgres" / "pgdata" / "postmaster.pid"
    pids["postgres"] = int(postmaster.read_text().splitlines()[0])
    return pids


def _health_pid(data_dir: Path, service: str) -> int | None:
    try:
        return int(json.loads((data_dir / "run" / f"{service}.health").read_text())["pid"])
    except (OSError, ValueError):
        return None  # between a crash and the restarted process writing its own


def _servers(data_dir: Path) -> dict[str, str]:
    loaded: dict[str, str] = json.loads((data_dir / "run" / "servers.json").read_text())
    return loaded


def _private(data_dir: Path) -> None:
    assert data_dir.stat().st_mode & 0o777 in (0o700, 0o711)  # 0711 as root: postgres traverses
    assert (data_dir / "credentials.json").stat().st_mode & 0o777 == 0o600
    for sub in ("nats", "postgres", "run"):
        assert (data_dir / sub).stat().st_mode & 0o077 == 0, sub


async def _refuses_anonymous_logins(data_dir: Path) -> None:
    """The data dir is private, the credentials file 0600, and neither server lets anyone in
    without a password: NATS refuses an anonymous login, Postgres a password-less one."""
    import asyncpg

    _private(data_dir)
    url = _servers(data_dir)["nats_url"]
    with pytest.raises(Exception, match=r"(?i)authorization"):
        await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=1)
    logins = passwordless_logins(_servers(data_dir)["database_url"])
    assert len(logins) == 2  # the services go through the socket; tools may use TCP
    for login in logins:
        with pytest.raises(asyncpg.PostgresError, match="password"):
            await asyncpg.connect(login, password="")


async def _stop(up: asyncio.subprocess.Process) -> int:
    up.send_signal(signal.SIGINT)
    return await asyncio.wait_for(up.wait(), 40)


def _login(data_dir: Path, user: str = "operator") -> dict[str, str]:
    """`user`'s generated NATS login, from the data dir's credentials file."""
    record = json.loads((data_dir / "credentials.json").read_text())
    return {"user": user, "password": record["nats"][user], "inbox_prefix": f"_INBOX_{user}"}


async def _session_messages(nats_url: str, login: dict[str, str]) -> list[bytes]:
    nc = await nats.connect(nats_url, **login)
    try:
        js = nc.jetstream()
        info = await js.stream_info("SESSIONS")
        return [
            (await js.get_msg("SESSIONS", seq)).data or b""
            for seq in range(1, info.state.last_seq + 1)
        ]
    finally:
        await nc.close()


async def _publish(nats_url: str, login: dict[str, str]) -> None:
    nc = await nats.connect(nats_url, **login)
    try:
        ack = await nc.jetstream().publish(
            "tavern.session.s_e2e.session.created",
            b'{"hello": "again"}',
            headers={"Nats-Msg-Id": "e2e-1"},
        )
        assert ack.stream == "SESSIONS"
    finally:
        await nc.close()


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """Outside pytest's tmp root: as root, the embedded Postgres runs as another user that must
    traverse the path, and every new pytest session resets /tmp/pytest-of-root to 0700."""
    path = Path(tempfile.mkdtemp(prefix="tavern-e2e-"))
    yield path / "data"
    shutil.rmtree(path, ignore_errors=True)


async def test_up_runs_everything_stops_cleanly_and_resumes_with_its_data(
    data_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "up.log"
    try:
        async with tavern_up(data_dir, log) as up:
            await eventually(lambda: _green(data_dir), timeout=45, interval=0.5)
            await _refuses_a_second_up(data_dir)
            await _restarts_a_crashed_service(data_dir, log)
            await _publish(_servers(data_dir)["nats_url"], _login(data_dir))
            await _refuses_anonymous_logins(data_dir)
            first_credentials = (data_dir / "credentials.json").read_text()
            pids = _pids(data_dir)
            _one_scheduling_group(up.pid, pids)
            assert await _stop(up) == 0
        await _all_gone(pids)
        assert not (data_dir / "run" / "servers.json").exists()

        second_run = len(_text(log))
        async with tavern_up(data_dir, log) as up:
            await eventually(lambda: _green(data_dir), timeout=45, interval=0.5)
            assert await _session_messages(_servers(data_dir)["nats_url"], _login(data_dir)) == [
                b'{"hello": "again"}'
            ]
            assert (data_dir / "credentials.json").read_text() == first_credentials  # reused
            assert "unchanged  schema ledger at version" in _text(log)  # Postgres kept it too
            pids = _pids(data_dir)
            assert await _stop(up) == 0
        await _all_gone(pids)
        stops = [line for line in _text(log)[second_run:].splitlines() if "stopped" in line]
        for name in OWNED:  # each shut down cleanly: none died of the stop signal
            assert any(line.split() == [f"[{name}]", "stopped"] for line in stops), (name, stops)
    except BaseException:
        sys.stderr.write(_text(log)[-6000:])
        raise


def _one_scheduling_group(up_pid: int, pids: dict[str, int]) -> None:
    """Each process `tavern up` starts is in its session (one scheduling group, where the
    background services' niceness counts), in a process group of its own (signals)."""
    session = os.getsid(up_pid)
    group = Path(f"/proc/{up_pid}/autogroup")
    for name, pid in pids.items():
        if name == "postgres":  # pg_ctl starts the postmaster in a session of its own
            continue
        assert (os.getsid(pid), os.getpgid(pid)) == (session, pid), name
        if group.exists():
            assert Path(f"/proc/{pid}/autogroup").read_text() == group.read_text(), name
    base = os.getpriority(os.PRIO_PROCESS, up_pid)
    nice = {name: os.getpriority(os.PRIO_PROCESS, pids[name]) for name in OWNED}
    background = max(base, 10)
    assert nice == {
        "loop": base,
        "ledger": base,
        "gateway": base,
        "consolidator": background,
        "projector": background,
    }


async def _all_gone(pids: dict[str, int]) -> None:
    """pg_ctl returns once the pid file is gone; the postmaster exits a moment later."""

    def alive() -> list[str]:
        return [f"{name} (pid {pid})" for name, pid in pids.items() if pid_alive(pid)]

    await eventually(lambda: not alive(), timeout=10)
    assert alive() == []


async def _restarts_a_crashed_service(data_dir: Path, log: Path) -> None:
    crashed = _pids(data_dir)["ledger"]
    os.kill(crashed, signal.SIGKILL)
    await eventually(lambda: _health_pid(data_dir, "ledger") not in (None, crashed), timeout=20)
    await eventually(lambda: _green(data_dir), timeout=30, interval=0.5)
    assert "exited with code -9; restarting in 1s (restart 1)" in _text(log)


def _text(path: Path) -> str:
    return path.read_text(errors="replace")


async def _refuses_a_second_up(data_dir: Path) -> None:
    second = await asyncio.create_subprocess_exec(
        TAVERN,
        "up",
        "--no-demo",
        env=_env(data_dir),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(second.communicate(), 20)
    assert second.returncode == 1
    assert "already runs on" in output.decode()
