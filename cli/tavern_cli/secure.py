"""Embedded servers with authentication on, and what each service process is given.

Shared by `tavern up`, the test harness and the reliability stack, so all three run the same
users, roles and permissions as a production deployment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tavern_cli import access, catalog
from tavern_runtime.credentials import DB_ROLES, PG_ADMIN, Credentials
from tavern_runtime.dbroles import role_dsn
from tavern_runtime.embedded import EmbeddedNats, EmbeddedPostgres


def embedded_nats(data_dir: Path, credentials: Credentials, **options: Any) -> EmbeddedNats:
    """A nats-server with the users and permissions of deploy/nats/accounts.conf."""
    return EmbeddedNats(
        data_dir, accounts=access.render_accounts(), passwords=credentials.nats, **options
    )


def embedded_postgres(data_dir: Path, credentials: Credentials, **options: Any) -> EmbeddedPostgres:
    """A PostgreSQL that takes password (scram-sha-256) logins only."""
    return EmbeddedPostgres(data_dir, password=credentials.db_password(PG_ADMIN), **options)


def role_passwords(credentials: Credentials) -> dict[str, str]:
    """role -> password of every service that owns a schema."""
    return {role: credentials.db_password(role) for role in DB_ROLES}


def uses_database(service: str) -> bool:
    return catalog.BY_NAME[service].migrations() is not None


def service_env(
    service: str,
    credentials: Credentials,
    *,
    admin_dsn: str | None,
    nats: bool = True,
) -> dict[str, str]:
    """The login of one service process: its NATS user (when `nats`), and its own database
    role when it keeps tables and `admin_dsn` is the embedded server's (else nothing). A
    service without tables gets an empty TAVERN_DATABASE_URL: no database credentials."""
    env: dict[str, str] = {}
    if nats:
        env["TAVERN_NATS_USER"] = service
        env["TAVERN_NATS_PASSWORD"] = credentials.nats_password(service)
    if admin_dsn is not None:
        if uses_database(service):
            password = credentials.db_password(service)
            env["TAVERN_DATABASE_URL"] = role_dsn(admin_dsn, service, password)
        else:
            env["TAVERN_DATABASE_URL"] = ""
    return env
