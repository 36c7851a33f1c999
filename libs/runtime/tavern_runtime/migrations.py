"""Numbered SQL migrations: each service owns one schema and its `sql/NNN_<what>.sql` files.

The plan (what to apply, what to refuse) is pure; `migrate` applies it under an advisory lock,
one transaction per migration, recording each in `<schema>.schema_version`.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import structlog

from tavern_runtime.errors import ConfigurationError
from tavern_runtime.pg import Pool, holds_session_state

log = structlog.get_logger(__name__)

_FILE = re.compile(r"^(\d{3,})_([a-z0-9_]+)\.sql$")
_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
LOCK_NAMESPACE = 0x7A7E  # first key of the two-key advisory lock; the second is the schema's hash


class MigrationError(ConfigurationError):
    """The migrations on disk and the ones applied to the database disagree."""

    reason = "migration"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        """sha256 of the text with normalised line endings (a CRLF checkout is no change)."""
        text = self.sql.replace("\r\n", "\n")
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Applied:
    """A row of `<schema>.schema_version`."""

    version: int
    name: str
    checksum: str


@dataclass(frozen=True)
class MigrationSet:
    """The migrations of one schema, in version order."""

    schema: str
    migrations: tuple[Migration, ...]

    @property
    def latest(self) -> int:
        return self.migrations[-1].version if self.migrations else 0


@dataclass(frozen=True)
class Plan:
    schema: str
    current: int
    pending: tuple[Migration, ...]


@dataclass(frozen=True)
class MigrationReport:
    schema: str
    before: int
    after: int
    applied: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.applied)


def parse_filename(filename: str) -> tuple[int, str] | None:
    """`"003_add_index.sql"` -> `(3, "add_index")`; anything else -> None."""
    match = _FILE.fullmatch(filename)
    return (int(match.group(1)), match.group(2)) if match else None


def migration_set(schema: str, migrations: Sequence[Migration]) -> MigrationSet:
    """Validate and order: a legal schema name, versions 1..N with no gap or duplicate."""
    if not _SCHEMA.fullmatch(schema):
        raise MigrationError(f"invalid schema name {schema!r}")
    ordered = tuple(sorted(migrations, key=lambda m: m.version))
    versions = [m.version for m in ordered]
    if versions != list(range(1, len(ordered) + 1)):
        raise MigrationError(
            f"migrations of {schema} must be numbered 1..N without gaps: {versions}"
        )
    return MigrationSet(schema, ordered)


def load_migrations(schema: str, package: str) -> MigrationSet:
    """The `sql/NNN_<what>.sql` files of `package` (e.g. `tavern_ledger`)."""
    folder = resources.files(package).joinpath("sql")
    found = []
    for entry in folder.iterdir():
        parsed = parse_filename(entry.name)
        if parsed is not None:
            found.append(Migration(parsed[0], parsed[1], entry.read_text(encoding="utf-8")))
    return migration_set(schema, found)


def plan(known: MigrationSet, applied: Sequence[Applied]) -> Plan:
    """What to apply to bring the schema to `known.latest`; refuse anything inconsistent."""
    by_version = {m.version: m for m in known.migrations}
    current = max((a.version for a in applied), default=0)
    if current > known.latest:
        raise MigrationError(
            f"schema {known.schema} is at version {current} but this code knows only up to "
            f"{known.latest}: run a newer release of the service (or restore the database)",
            schema=known.schema,
            database_version=current,
            code_version=known.latest,
        )
    for row in applied:
        _check_applied(known.schema, by_version[row.version], row)
    missing = set(range(1, current + 1)) - {a.version for a in applied}
    if missing:
        raise MigrationError(
            f"schema {known.schema} is at version {current} but misses {sorted(missing)}"
        )
    pending = tuple(m for m in known.migrations if m.version > current)
    return Plan(known.schema, current, pending)


def _check_applied(schema: str, migration: Migration, row: Applied) -> None:
    if migration.checksum != row.checksum:
        raise MigrationError(
            f"migration {schema} {row.version:03d}_{row.name} was changed after it was applied "
            "(checksum differs): add a new migration instead of editing an applied one",
            schema=schema,
            version=row.version,
        )


# --- applying ------------------------------------------------------------------------------------


def _version_table_sql(schema: str) -> str:
    return (
        f"CREATE SCHEMA IF NOT EXISTS {schema};\n"
        f"CREATE TABLE IF NOT EXISTS {schema}.schema_version (\n"
        "  version int PRIMARY KEY,\n"
        "  name text NOT NULL,\n"
        "  applied_at timestamptz NOT NULL DEFAULT now(),\n"
        "  checksum text NOT NULL\n"
        ");"
    )


async def migrate(pool: Pool, known: MigrationSet) -> MigrationReport:
    """Apply the pending migrations of one schema. Safe with many replicas starting at once:
    they queue on the advisory lock and the later ones find nothing pending."""
    async with pool.acquire() as conn:
        holds_session_state(conn)
        await conn.execute(
            "SELECT pg_advisory_lock($1, hashtext($2))", LOCK_NAMESPACE, known.schema
        )
        try:
            return await _migrate_locked(conn, known)
        finally:
            # A broken connection has lost the lock already; don't mask the original error.
            with contextlib.suppress(Exception):
                await conn.execute(
                    "SELECT pg_advisory_unlock($1, hashtext($2))", LOCK_NAMESPACE, known.schema
                )


async def _migrate_locked(conn: Pool, known: MigrationSet) -> MigrationReport:
    await conn.execute(_version_table_sql(known.schema))
    todo = plan(known, await applied_versions(conn, known.schema))
    for migration in todo.pending:
        await _apply(conn, known.schema, migration)
    after = todo.pending[-1].version if todo.pending else todo.current
    names = tuple(f"{m.version:03d}_{m.name}" for m in todo.pending)
    event = "schema_migrated" if names else "schema_current"
    log.info(event, schema=known.schema, before=todo.current, after=after, applied=names)
    return MigrationReport(known.schema, todo.current, after, names)


async def applied_versions(conn: Pool, schema: str) -> list[Applied]:
    rows = await conn.fetch(f"SELECT version, name, checksum FROM {schema}.schema_version")
    return [Applied(r["version"], r["name"], r["checksum"]) for r in rows]


async def _apply(conn: Pool, schema: str, migration: Migration) -> None:
    async with conn.transaction():
        await conn.execute(migration.sql)
        await conn.execute(
            f"INSERT INTO {schema}.schema_version (version, name, checksum) VALUES ($1, $2, $3)",
            migration.version,
            migration.name,
            migration.checksum,
        )
    log.info("migration_applied", schema=schema, version=migration.version, name=migration.name)
