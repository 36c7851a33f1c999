"""`tavern init`: provision streams, consumers and KV buckets, then migrate every service's schema,
against the given servers (for compose and Kubernetes jobs). Idempotent.

Exit code 1 on drift (a live resource differs from the code) unless `--apply-drift`.
"""

from __future__ import annotations

import argparse
import asyncio

from tavern_cli import initialise
from tavern_cli.endpoints import Endpoints, nats_connection, resolve
from tavern_cli.rundir import Layout, data_dir_from_env, read_servers
from tavern_runtime.auth import ensure_key_file
from tavern_runtime.credentials import DB_ROLES, read_credentials
from tavern_runtime.errors import TavernError
from tavern_runtime.settings import TavernSettings


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nats-url", help="NATS servers (default: env, then `tavern up`)")
    parser.add_argument("--database-url", help="Postgres DSN (default: env, then `tavern up`)")
    parser.add_argument(
        "--apply-drift",
        action="store_true",
        help="rewrite mutable fields of drifted streams/consumers/buckets instead of failing",
    )


def run(args: argparse.Namespace, extra: list[str]) -> int:
    initialise.quiet_logging()
    layout = Layout(data_dir_from_env())
    if not TavernSettings().auth_key.get_secret_value():
        ensure_key_file(layout.root)  # as `tavern up` does: the CLI signs its requests with it
    endpoints = resolve(layout, args.nats_url, args.database_url)
    try:
        if not endpoints.nats_url:  # provisioning a server nobody named could be anyone's
            raise endpoints.nothing_running()
        roles = initialise.RoleSettings().roles() or _embedded_roles(layout, endpoints)
        return asyncio.run(_init(endpoints, bool(args.apply_drift), roles))
    except TavernError as exc:
        print(f"tavern init: {exc.message}")
        return 1


def _embedded_roles(layout: Layout, endpoints: Endpoints) -> dict[str, str] | None:
    """On the Postgres of a running `tavern up`: its generated service roles."""
    running = read_servers(layout)
    credentials = read_credentials(layout.root)
    if running is None or credentials is None or endpoints.database_url != running.database_url:
        return None
    return {role: credentials.db_password(role) for role in DB_ROLES}


async def _init(endpoints: Endpoints, apply_drift: bool, roles: dict[str, str] | None) -> int:
    settings = TavernSettings()
    async with nats_connection(endpoints) as nc:
        report = await initialise.provision_all(
            nc, settings.stream_replicas, apply_drift, endpoints.database_url
        )
    for line in report.lines():
        print(line)
    migrations = await initialise.migrate_all(endpoints.database_url or _missing_dsn(), roles)
    for line in initialise.migration_lines(migrations):
        print(line)
    if not report.ok:
        print("drift found: fix it with `tavern init --apply-drift` (immutable fields: recreate)")
        return 1
    return 0


def _missing_dsn() -> str:
    raise TavernError("no database: pass --database-url or set TAVERN_DATABASE_URL")
