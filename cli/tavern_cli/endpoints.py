"""Which servers a CLI command talks to, and short-lived connections to them.

Order: command-line option, then `TAVERN_NATS_URL` / `TAVERN_DATABASE_URL`, then the
`run/servers.json` of a `tavern up` running on the data dir. There is no default server: with
none of these a command says that nothing is running and how to point it at a server (a NATS
that happens to listen on the default port may be someone else's).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from nats.aio.client import Client

from tavern_cli import identity
from tavern_cli.rundir import Layout, read_servers
from tavern_runtime.auth import connect_signed
from tavern_runtime.bus import login_options
from tavern_runtime.credentials import read_credentials
from tavern_runtime.errors import ConfigurationError
from tavern_runtime.secretscan import redact_url
from tavern_runtime.settings import TavernSettings

CONNECT_TIMEOUT_S = 3


@dataclass(frozen=True)
class Endpoints:
    nats_url: str
    database_url: str
    source: str
    nats_user: str = ""
    nats_password: str = field(default="", repr=False)
    """The login `tavern up` generated (the operator's), when its NATS is the one in use."""
    data_dir: str = ""

    def nothing_running(self, what: str = "NATS") -> ConfigurationError:
        option = "--nats-url (or TAVERN_NATS_URL)"
        if what != "NATS":
            option = "--database-url (or TAVERN_DATABASE_URL)"
        return ConfigurationError(
            f"nothing is running on {self.data_dir or 'this data dir'}: start it with "
            f"`./tavern up` (TAVERN_DATA_DIR picks the data dir), or point at a {what} "
            f"server with {option}"
        )

    @property
    def nats_servers(self) -> list[str]:
        return [s.strip() for s in self.nats_url.split(",") if s.strip()]


def resolve(
    layout: Layout, nats_url: str | None = None, database_url: str | None = None
) -> Endpoints:
    """The servers to use, and where that answer came from (for the user)."""
    env_nats, env_db = os.environ.get("TAVERN_NATS_URL"), os.environ.get("TAVERN_DATABASE_URL")
    running = read_servers(layout)
    nats_found = nats_url or env_nats or (running.nats_url if running else None)
    db_found = database_url or env_db or (running.database_url if running else None)
    if nats_url or database_url:
        source = "command line"
    elif env_nats or env_db:
        source = "environment"
    elif running:
        source = f"`tavern up` (pid {running.pid}) on {layout.root}"
    else:
        source = f"nothing (no `tavern up` running on {layout.root})"
    user, password = "", ""
    if running is not None and nats_found == running.nats_url:
        user, password = _operator_login(layout)
    return Endpoints(nats_found or "", db_found or "", source, user, password, str(layout.root))


def _operator_login(layout: Layout) -> tuple[str, str]:
    """The CLI acts as the local operator on the NATS of `tavern up` (credentials.json)."""
    found = read_credentials(layout.root)
    if found is None or "operator" not in found.nats:
        return "", ""
    return "operator", found.nats_password("operator")


async def _quiet(_: Exception) -> None:
    """nats-py prints every failed attempt by default; the caller reports the failure once."""


@asynccontextmanager
async def nats_connection(endpoints: Endpoints) -> AsyncIterator[Client]:
    """One connection attempt, no reconnects: a CLI command should fail fast and say why.
    Everything published on it carries the CLI's principal (`tavern_cli.identity`)."""
    if not endpoints.nats_servers:
        raise endpoints.nothing_running()
    settings = TavernSettings()
    if settings.nats_user:
        credentials = login_options(
            settings.nats_user, settings.nats_password, endpoints.nats_servers
        )
    else:
        credentials = login_options(
            endpoints.nats_user, endpoints.nats_password, endpoints.nats_servers
        )
    signer = identity.credentials()
    try:
        # nats-py retries the initial connect forever unless max_reconnect_attempts > 0.
        nc = await asyncio.wait_for(
            connect_signed(
                endpoints.nats_servers,
                signer,
                identity.principal(),
                name="tavern-cli",
                allow_reconnect=False,
                max_reconnect_attempts=1,
                reconnect_time_wait=0.2,
                connect_timeout=CONNECT_TIMEOUT_S,
                error_cb=_quiet,
                **credentials,
            ),
            CONNECT_TIMEOUT_S * 2 * len(endpoints.nats_servers) + 1,
        )
    except Exception as exc:  # any failure to connect is reported the same way
        raise ConfigurationError(
            f"cannot reach NATS at {redact_url(endpoints.nats_url)}: "
            f"{str(exc).removeprefix('nats: ') or type(exc).__name__}"
        ) from None
    try:
        yield nc
    finally:
        await nc.close()
