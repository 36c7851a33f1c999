"""`tavern init`: provision streams, consumers and KV buckets, then migrate every service's schema,
against the given servers (for compose and Kubernetes jobs). Idempotent.

Exit code 1 on drift (a live resource differs from the code) unless `--apply-drift`.
"""

from __future__ import annotations

import argparse
import asyncio

from tavern_cli import initialise
from tavern_cli.endpoints import Endpoints, nats_connection, resolve
from tavern_cli.rundir import Layout, data_dir_from_env
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
    endpoints = resolve(Layout(data_dir_from_env()), args.nats_url, args.database_url)
    try:
        return asyncio.run(_init(endpoints, bool(args.apply_drift)))
    except TavernError as exc:
        print(f"tavern init: {exc.message}")
        return 1


async def _init(endpoints: Endpoints, apply_drift: bool) -> int:
    settings = TavernSettings()
    async with nats_connection(endpoints) as nc:
        report = await initialise.provision_all(nc, settings.stream_replicas, apply_drift)
    for line in report.lines():
        print(line)
    migrations = await initialise.migrate_all(endpoints.database_url or _missing_dsn())
    for line in initialise.migration_lines(migrations):
        print(line)
    if not report.ok:
        print("drift found: fix it with `tavern init --apply-drift` (immutable fields: recreate)")
        return 1
    return 0


def _missing_dsn() -> str:
    raise TavernError("no database: set TAVERN_DATABASE_URL or pass --database-url")
