"""`tavern up`: the whole system on this machine until Ctrl-C.

Embedded NATS and Postgres under the data dir (unless `TAVERN_NATS_URL` / `TAVERN_DATABASE_URL`
point elsewhere), provisioning and migrations, then the services as separate processes; it
prints the web app's URL.
A second `tavern up` on the same data dir resumes with all its data.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from tavern_cli import catalog, demo, initialise, secure
from tavern_cli.endpoints import Endpoints, nats_connection
from tavern_cli.probes import all_ready
from tavern_cli.rundir import (
    Layout,
    Servers,
    UpLock,
    data_dir_from_env,
    gateway_url,
    remove_servers,
    write_servers,
)
from tavern_cli.supervisor import Printer, Supervisor, silence_broken_output, stop_orphans
from tavern_runtime import filemodes, pg
from tavern_runtime.auth import ensure_key_file
from tavern_runtime.credentials import Credentials, load_or_create, private_dir
from tavern_runtime.embedded import EmbeddedNats, EmbeddedPostgres
from tavern_runtime.errors import ConfigurationError, TavernError
from tavern_runtime.secretscan import redact_url
from tavern_runtime.settings import TavernSettings

READY_TIMEOUT_S = 60.0
STOP_MARGIN_S = 5.0  # beyond a service's own grace: pool close, process exit


@dataclass(frozen=True)
class RunningSystem:
    """What a demo needs to talk to the system `tavern up` runs."""

    nats_url: str
    database_url: str
    data_dir: Path
    nats_user: str = ""
    nats_password: str = field(default="", repr=False)
    """The operator login of the embedded NATS (empty with a NATS of your own): the demo
    follows its session's log, which the `client` login may not read."""


Demo = Callable[[RunningSystem], Coroutine[Any, Any, None]]


async def _play_demo(system: RunningSystem) -> None:
    await demo.run_in_up(system.nats_url, system.data_dir, system.nats_user, system.nats_password)


DEMO: Demo | None = _play_demo
"""The demo conversation `tavern up` plays once the services are ready."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-demo", action="store_true", help="start without the demo")
    parser.add_argument(
        "--apply-drift",
        action="store_true",
        help="rewrite streams/consumers whose live config drifted from the code",
    )
    parser.epilog = (
        "Data lives under TAVERN_DATA_DIR (default ./.tavern). Set TAVERN_NATS_URL or "
        "TAVERN_DATABASE_URL to use servers of your own instead of the embedded ones."
    )


def run(args: argparse.Namespace, extra: list[str]) -> int:
    initialise.quiet_logging()
    layout, printer = Layout(data_dir_from_env()), Printer()
    lock = UpLock(layout)
    try:
        lock.acquire()
    except ConfigurationError as exc:
        print(f"tavern up: {exc.message}", file=sys.stderr)
        return 1
    if not TavernSettings().auth_key.get_secret_value():
        ensure_key_file(layout.root)  # the services and the CLI sign and check with it
    previous = signal.signal(signal.SIGTERM, _interrupt)
    grace_s = TavernSettings().shutdown_grace_s + STOP_MARGIN_S
    stop_orphans(layout.run, catalog.ALL, grace_s, printer.say)  # before their servers
    servers = EmbeddedServers(layout)
    try:
        return asyncio.run(_session(layout, servers, servers.start(printer), args, printer))
    except TavernError as exc:
        printer.say(f"error: {exc.message}")
        return 1
    except KeyboardInterrupt:
        printer.say("interrupted while starting")
        return 130
    finally:
        _ignore_signals()  # a second Ctrl-C must not leave a server running
        servers.stop(printer)
        remove_servers(layout)
        lock.release()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, previous)


def _ignore_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM before the event loop runs: unwind like Ctrl-C, so servers are stopped."""
    raise KeyboardInterrupt


@dataclass
class EmbeddedServers:
    """The servers this `tavern up` started (none when given external ones)."""

    layout: Layout
    nats: EmbeddedNats | None = None
    postgres: EmbeddedPostgres | None = None
    notes: list[str] = field(default_factory=list)
    credentials: Credentials | None = field(default=None, repr=False)
    """The generated logins (`<data dir>/credentials.json`), once a server is embedded."""

    def start(self, printer: Printer) -> Servers:
        filemodes.private_umask()  # the servers and services it starts inherit it
        private_dir(self.layout.root)
        if repaired := filemodes.make_private(self.layout.root):
            printer.say(f"made {repaired} files and folders of the data dir owner-only")
        external_nats = os.environ.get("TAVERN_NATS_URL")
        external_db = os.environ.get("TAVERN_DATABASE_URL")
        if not (external_nats and external_db):
            self.credentials = load_or_create(self.layout.root)
        nats_url = external_nats or self._start_nats(printer)
        database_url = external_db or self._start_postgres(printer)
        monitor = self.nats.monitor_url if self.nats else ""
        return Servers(nats_url, database_url, monitor, os.getpid())

    def _start_nats(self, printer: Printer) -> str:
        assert self.credentials is not None
        printer.say(f"starting nats-server (data {self.layout.nats})")
        self.nats = secure.embedded_nats(self.layout.nats, self.credentials, stop_orphans=True)
        self.nats.start()
        return self.nats.url

    def _start_postgres(self, printer: Printer) -> str:
        assert self.credentials is not None
        printer.say(f"starting PostgreSQL (data {self.layout.postgres})")
        self.postgres = secure.embedded_postgres(
            self.layout.postgres, self.credentials, stop_orphans=True
        )
        self.postgres.start()
        return self.postgres.dsn

    def login(self, user: str) -> tuple[str, str]:
        """`user`'s NATS login on the embedded server; ("", "") with a NATS of your own."""
        if self.nats is None or self.credentials is None:
            return "", ""
        return user, self.credentials.nats_password(user)

    def service_envs(self, servers: Servers) -> dict[str, dict[str, str]]:
        """Each service's own login: its NATS user on the embedded server, its database role
        on the embedded Postgres (the loop: none)."""
        if self.credentials is None:
            return {}
        admin_dsn = servers.database_url if self.postgres is not None else None
        return {
            entry.name: secure.service_env(
                entry.name, self.credentials, admin_dsn=admin_dsn, nats=self.nats is not None
            )
            for entry in catalog.ALL
        }

    def role_passwords(self) -> dict[str, str] | None:
        if self.postgres is None or self.credentials is None:
            return None
        return secure.role_passwords(self.credentials)

    def stop(self, printer: Printer) -> None:
        """Postgres first, then NATS: the reverse of the start order."""
        if self.postgres is not None:
            printer.say("stopping PostgreSQL")
            self.postgres.stop()
            self.postgres = None
        if self.nats is not None:
            printer.say("stopping nats-server")
            self.nats.stop()
            self.nats = None


async def _session(
    layout: Layout,
    embedded: EmbeddedServers,
    servers: Servers,
    args: argparse.Namespace,
    out: Printer,
) -> int:
    stopper = Stopper(out)
    settings = TavernSettings()
    await _prepare(embedded, servers, settings, bool(args.apply_drift), out)
    if stopper.event.is_set():
        return 130
    write_servers(layout, servers)
    grace_s = settings.shutdown_grace_s + STOP_MARGIN_S
    supervisor = Supervisor(
        catalog.ALL,
        _child_env(layout, servers, embedded),
        out,
        grace_s,
        own_env=embedded.service_envs(servers),
        run_dir=layout.run,
    )
    stopper.on_repeat = supervisor.kill_all
    supervisor.start()
    _banner(layout, servers, out)
    extras = [asyncio.create_task(_announce_ready(layout, out, stopper.event))]
    user, password = embedded.login("operator")
    system = RunningSystem(servers.nats_url, servers.database_url, layout.root, user, password)
    extras += _demo(args, system, out)
    await stopper.event.wait()
    out.say("stopping services")
    for task in extras:
        task.cancel()
    await supervisor.stop()
    return 0


class Stopper:
    """SIGINT/SIGTERM: the first asks for a graceful stop, a repeat hurries it (kill)."""

    def __init__(self, out: Printer) -> None:
        self.event = asyncio.Event()
        self.out = out
        self.on_repeat: Callable[[], None] = lambda: None
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self._received, signum)

    def _received(self, signum: int) -> None:
        """Act first, then say so: the saying may fail (a reader gone) and must not matter."""
        name = signal.Signals(signum).name
        if self.event.is_set():
            self.on_repeat()
            self.out.say(f"{name} again: killing services")
            return
        self.event.set()
        self.out.say(f"{name}: stopping (repeat to kill the services at once)")


async def _prepare(
    embedded: EmbeddedServers,
    servers: Servers,
    settings: TavernSettings,
    apply: bool,
    out: Printer,
) -> None:
    """Streams, consumers, buckets, then every service's role and schema: idempotent."""
    user, password = embedded.login("operator")
    endpoints = Endpoints(servers.nats_url, servers.database_url, "up", user, password)
    async with nats_connection(endpoints) as nc:
        report = await initialise.provision_all(
            nc, settings.stream_replicas, apply, servers.database_url
        )
    for line in report.lines():
        if not line.startswith("unchanged"):
            out.say(line)
    if not report.ok:
        out.say("drift left as is (services may refuse to start): `tavern up --apply-drift`")
    reports = await initialise.migrate_all(servers.database_url, embedded.role_passwords())
    for line in initialise.migration_lines(reports):
        out.say(line)


def _child_env(layout: Layout, servers: Servers, embedded: EmbeddedServers) -> dict[str, str]:
    """What every service process shares. The administrator's DSN only reaches them with a
    Postgres of your own; on the embedded one each gets its own role (`service_envs`)."""
    env = dict(os.environ)
    if embedded.nats is not None:  # each logs in as its own user instead
        env.pop("TAVERN_NATS_USER", None)
        env.pop("TAVERN_NATS_PASSWORD", None)
    env.update(
        TAVERN_NATS_URL=servers.nats_url,
        TAVERN_DATABASE_URL=servers.database_url if embedded.postgres is None else "",
        TAVERN_DATA_DIR=str(layout.root),
        TAVERN_HEALTH_PORT="0",  # four services on one host: each picks a free port
        PYTHONUNBUFFERED="1",
    )
    env.setdefault("TAVERN_LOG_FORMAT", "console")
    env.setdefault("TAVERN_LOG_LEVEL", "WARNING")  # the demo stays readable; INFO for more
    return env


def _banner(layout: Layout, servers: Servers, out: Printer) -> None:
    monitor = servers.nats_monitor_url
    nats_note = f" (embedded, monitor {monitor})" if monitor else ""
    out.say("AgentTavern is starting")
    out.say(f"  NATS      {redact_url(servers.nats_url)}{nats_note}")
    out.say(f"  Postgres  {pg.describe_dsn(servers.database_url)}")
    out.say(f"  data dir  {layout.root}")
    out.say(f"  services  {', '.join(s.name for s in catalog.ALL)}")
    out.say("  `tavern status` in another shell shows health; Ctrl-C stops everything")


async def _announce_ready(layout: Layout, out: Printer, stop: asyncio.Event) -> None:
    deadline = asyncio.get_running_loop().time() + READY_TIMEOUT_S
    while not stop.is_set() and asyncio.get_running_loop().time() < deadline:
        if await all_ready(layout):
            out.say("all services ready")
            _say_url(layout, out)
            return
        await asyncio.sleep(0.5)
    if not stop.is_set():
        out.say(f"not all services ready after {READY_TIMEOUT_S:.0f}s: see `tavern status`")


def _say_url(layout: Layout, out: Printer) -> None:
    url = gateway_url(layout)
    if url:
        out.say(f"open {url} (the web app; the first visit creates the owner account)")


def _demo(
    args: argparse.Namespace, system: RunningSystem, out: Printer
) -> list[asyncio.Task[None]]:
    if args.no_demo:
        return []
    if DEMO is None:
        out.say("the demo conversation arrives with the loop service (--no-demo hides this note)")
        return []
    return [asyncio.create_task(_quiet_if_unread(DEMO(system), out))]


async def _quiet_if_unread(demo_run: Coroutine[Any, Any, None], out: Printer) -> None:
    """The demo prints to stdout; a reader gone (a pipe closed by Ctrl-C) ends it quietly."""
    try:
        await demo_run
    except (BrokenPipeError, ValueError):
        out.closed = True
        silence_broken_output(sys.stdout)
