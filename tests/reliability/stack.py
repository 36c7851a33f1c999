"""The whole system as separate processes, under the test's control: one nats-server, one
PostgreSQL, and the four services (`python -m tavern_<svc>`), each optionally behind its own
cuttable proxy to NATS. Any piece can be killed, stopped, restarted or cut off.

This is what `tavern up` runs (same provisioning, migrations and service commands), minus its
supervisor: the harness restarts a service that exits on its own and counts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import nats
from nats.aio.client import Client

from tavern_cli import catalog, initialise, secure
from tavern_runtime.bus import login_options
from tavern_runtime.credentials import Credentials
from tests.reliability.proxy import CutProxy
from tests.support import TEST_AUTH_KEY, signed_nats

SERVICES = ("loop", "ledger", "projector", "consolidator")
WITH_GATEWAY = (*SERVICES, "gateway")
"""The services plus the web app's gateway (browser tests): its URL is `Stack.gateway_url`."""
READY_TIMEOUT_S = 60.0
RESTART_DELAY_S = 1.0


@dataclass
class Exit:
    service: str
    code: int
    at: float


@dataclass
class Service:
    """One service process and what happened to it."""

    name: str
    proxy: CutProxy | None = None
    process: asyncio.subprocess.Process | None = None
    expected_exit: bool = False
    starts: int = 0
    unexpected: list[Exit] = field(default_factory=list)
    watcher: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process and self.process.returncode is None else None


def _pid_of_file(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(path.read_text().split()[0])
    return None


def rss_bytes(pid: int | None) -> int:
    """Resident memory of one process (0 if it is gone)."""
    if pid is None:
        return 0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def pss_bytes(pid: int | None) -> int:
    """Proportional set size: shared pages divided among the processes that map them."""
    if pid is None:
        return 0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid: int | None, *, reaped: bool = False) -> float:
    """CPU time (user + system) one process has used; with `reaped`, also its waited-for
    children's (how Postgres's finished backends are counted)."""
    if pid is None:
        return 0.0
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime
        if reaped:
            ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
        return ticks / os.sysconf("SC_CLK_TCK")
    return 0.0


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


class Stack:
    """nats-server + PostgreSQL + four service processes in `root`."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        proxied: bool = True,
        grace_s: float = 5.0,
        env: Mapping[str, str] | None = None,
        services: Iterable[str] = SERVICES,
        auto_restart: bool = True,
    ) -> None:
        self.root = root or Path(tempfile.mkdtemp(prefix="tavern-rel-"))
        self.data_dir = self.root / "data"
        self.logs = self.root / "logs"
        self.credentials = Credentials.generate()
        """The logins `tavern up` would generate: a NATS user and a database role each."""
        self.nats = secure.embedded_nats(self.root / "nats", self.credentials)
        self.postgres = secure.embedded_postgres(self.root / "postgres", self.credentials)
        self.proxied, self.grace_s = proxied, grace_s
        self.extra_env = dict(env or {})
        self.auto_restart = auto_restart
        self.services = {name: Service(name) for name in services}
        self.nc: Client | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        await asyncio.gather(
            asyncio.to_thread(self.nats.start), asyncio.to_thread(self.postgres.start)
        )
        self.nc = await signed_nats(  # the operator, as the CLI is
            self.nats.url,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.5,
            name="rel-client",
            **login_options("operator", self.credentials.nats_password("operator")),
        )
        report = await initialise.provision_all(self.nc, 1, False)
        assert report.ok, report.lines()
        await initialise.migrate_all(self.database_url, secure.role_passwords(self.credentials))
        for service in self.services.values():
            if self.proxied:
                service.proxy = CutProxy("127.0.0.1", self.nats.port, name=f"proxy-{service.name}")
                service.proxy.start()
            await self._spawn(service)
        await self.wait_ready()

    async def close(self) -> None:
        """Stop every service (SIGTERM, then SIGKILL), then the servers; keep the root."""
        await asyncio.gather(
            *(self.stop_service(s, timeout=self.grace_s + 10) for s in self.services)
        )
        for service in self.services.values():
            if service.proxy is not None:
                service.proxy.close()
        if self.nc is not None:
            with contextlib.suppress(Exception):
                await self.nc.close()
        await asyncio.to_thread(self.postgres.stop)
        await asyncio.to_thread(self.nats.stop)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def js(self) -> nats.js.JetStreamContext:
        assert self.nc is not None
        return self.nc.jetstream(timeout=10)

    @property
    def database_url(self) -> str:
        """The administrator's DSN (for checks); each service logs in with its own role."""
        return self.postgres.dsn

    @property
    def chats_dir(self) -> Path:
        return self.data_dir / "chats"

    # --- services -------------------------------------------------------------------------------

    def _env(self, service: Service) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
        nats_url = service.proxy.url if service.proxy is not None else self.nats.url
        env.update(
            TAVERN_NATS_URL=nats_url,
            TAVERN_DATA_DIR=str(self.data_dir),
            TAVERN_HEALTH_PORT="0",
            TAVERN_LOG_FORMAT="json",
            TAVERN_LOG_LEVEL="WARNING",
            TAVERN_SHUTDOWN_GRACE_S=str(self.grace_s),
            TAVERN_AUTH_KEY=TEST_AUTH_KEY,
            PYTHONUNBUFFERED="1",
        )
        env.update(secure.service_env(service.name, self.credentials, admin_dsn=self.database_url))
        env.update(self.extra_env)
        return env

    async def _spawn(self, service: Service) -> None:
        entry = catalog.BY_NAME[service.name]
        with (self.logs / f"{service.name}.log").open("ab") as out:
            out.write(f"--- start {service.starts + 1} at {time.time():.3f}\n".encode())
            out.flush()
            service.process = await asyncio.create_subprocess_exec(
                sys.executable,
                *entry.command,
                env=self._env(service),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                process_group=0,  # in this session, as `tavern up` starts them (`yield_cpu`)
            )
        service.starts += 1
        service.expected_exit = False
        service.watcher = asyncio.create_task(self._watch(service, service.process))

    async def _watch(self, service: Service, process: asyncio.subprocess.Process) -> None:
        code = await process.wait()
        if service.expected_exit or service.process is not process:
            return
        service.unexpected.append(Exit(service.name, code, time.monotonic()))
        if self.auto_restart:
            await asyncio.sleep(RESTART_DELAY_S)
            if service.process is process and not service.expected_exit:
                await self._spawn(service)

    def service(self, name: str) -> Service:
        return self.services[name]

    async def kill(self, name: str) -> None:
        """kill -9 the service's process group."""
        await self._signal_and_wait(self.services[name], signal.SIGKILL, 10)

    async def restart(self, name: str, *, ready: bool = True) -> None:
        service = self.services[name]
        if service.pid is not None:
            await self.stop_service(name)
        await self._spawn(service)
        if ready:
            await self.wait_ready([name])

    async def stop_service(self, name: str, timeout: float | None = None) -> int | None:
        """SIGTERM; SIGKILL after `timeout` (default: grace + 5 s). The exit code."""
        service = self.services[name]
        limit = timeout if timeout is not None else self.grace_s + 5
        code = await self._signal_and_wait(service, signal.SIGTERM, limit)
        if code is None:
            code = await self._signal_and_wait(service, signal.SIGKILL, 10)
        return code

    async def _signal_and_wait(
        self, service: Service, signum: signal.Signals, timeout: float
    ) -> int | None:
        process = service.process
        if process is None or process.returncode is not None:
            return process.returncode if process else None
        service.expected_exit = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)
        try:
            return await asyncio.wait_for(process.wait(), timeout)
        except TimeoutError:
            return None

    async def wait_ready(
        self, names: Iterable[str] | None = None, timeout: float = READY_TIMEOUT_S
    ) -> None:
        deadline = time.monotonic() + timeout
        pending = list(names or self.services)
        async with httpx.AsyncClient(timeout=2) as client:
            while pending:
                pending = [n for n in pending if not await self._ready(client, n)]
                if not pending:
                    return
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"not ready after {timeout:.0f}s: {pending}\n{self.tails(pending)}"
                    )
                await asyncio.sleep(0.2)

    async def _ready(self, client: httpx.AsyncClient, name: str) -> bool:
        service = self.services[name]
        path = self.data_dir / "run" / f"{name}.health"
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        if service.pid is None or record.get("pid") != service.pid:
            return False
        try:
            return (await client.get(f"{record['url']}/readyz")).status_code == 200
        except httpx.HTTPError:
            return False

    def tails(self, names: Iterable[str] | None = None, chars: int = 3000) -> str:
        parts = []
        for name in names or self.services:
            path = self.logs / f"{name}.log"
            with contextlib.suppress(OSError):
                parts.append(f"--- {name}.log ---\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    # --- the network of one service -------------------------------------------------------------

    def cut(self, name: str) -> None:
        proxy = self.services[name].proxy
        assert proxy is not None, "the stack was started without proxies"
        proxy.cut()

    def restore(self, name: str) -> None:
        proxy = self.services[name].proxy
        assert proxy is not None
        proxy.restore()

    # --- the servers ----------------------------------------------------------------------------

    async def kill_nats(self) -> None:
        await asyncio.to_thread(self.nats.kill)

    async def start_nats(self) -> None:
        await asyncio.to_thread(self.nats.start)

    async def stop_postgres(self) -> None:
        await asyncio.to_thread(self.postgres.stop)

    async def start_postgres(self) -> None:
        await asyncio.to_thread(self.postgres.start)

    # --- measurements ---------------------------------------------------------------------------

    def pids(self) -> dict[str, int | None]:
        found: dict[str, int | None] = {name: s.pid for name, s in self.services.items()}
        found["nats-server"] = self.nats.process.pid if self.nats.process else None
        found["postgres"] = _pid_of_file(self.postgres.pgdata / "postmaster.pid")
        return found

    def rss(self) -> dict[str, int]:
        """RSS of each process; for Postgres the PSS of the postmaster and its backends (their
        RSS would count the shared buffers once per backend)."""
        pids = self.pids()
        found = {name: rss_bytes(pid) for name, pid in pids.items() if name != "postgres"}
        postmaster = pids["postgres"]
        backends = children_of(postmaster) if postmaster else []
        found["postgres"] = sum(pss_bytes(p) for p in [postmaster, *backends])
        return found

    def cpu(self) -> dict[str, float]:
        """CPU seconds each process has used so far; for Postgres the postmaster, its live
        backends and the backends that have exited."""
        pids = self.pids()
        found = {name: cpu_seconds(pid) for name, pid in pids.items() if name != "postgres"}
        postmaster = pids["postgres"]
        backends = children_of(postmaster) if postmaster else []
        found["postgres"] = cpu_seconds(postmaster, reaped=True) + sum(
            cpu_seconds(p) for p in backends
        )
        return found

    async def consumer_lags(self) -> dict[str, int]:
        """Messages each durable consumer has not yet acknowledged (pending + in flight)."""
        lags: dict[str, int] = {}
        for spec in catalog.all_consumers():
            try:
                info = await self.js.consumer_info(spec.stream, spec.name)
            except Exception:
                lags[spec.name] = -1
                continue
            lags[spec.name] = int(info.num_pending or 0) + int(info.num_ack_pending or 0)
        return lags

    @property
    def gateway_url(self) -> str:
        """The URL the gateway wrote once it listened (`<data dir>/run/gateway.url`)."""
        return str(json.loads((self.data_dir / "run" / "gateway.url").read_text())["url"])

    def unexpected_exits(self) -> list[Exit]:
        return [e for s in self.services.values() for e in s.unexpected]


@contextlib.asynccontextmanager
async def running_stack() -> AsyncIterator[Stack]:
    """A started stack, closed (and, unless TAVERN_KEEP_STACK is set, removed) afterwards; the
    services' log tails are printed if it fails."""
    system = Stack()
    try:
        await system.start()
        yield system
    except BaseException:
        print(system.tails())
        raise
    finally:
        await system.close()
        if not os.environ.get("TAVERN_KEEP_STACK"):
            system.remove()
