"""One Postgres role per service that keeps tables: it logs in with its own password, owns
its schema and everything in it, and has no right on any other service's schema.

`ensure_roles` runs as an administrator (the superuser of the embedded server, the
`POSTGRES_USER` of compose, the admin DSN of the Kubernetes init job) and is idempotent: it
creates what is missing, sets the passwords it is given, and takes over the schemas and
objects an older release created as the administrator (the upgrade of an existing database).
`ensure_extensions` creates the untrusted extensions a service's schema uses (only an
administrator may), in `public`, usable by the roles that need them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from urllib.parse import quote, urlsplit, urlunsplit

import asyncpg
import structlog

from tavern_runtime.errors import ConfigurationError
from tavern_runtime.pg import describe_dsn, redact

log = structlog.get_logger(__name__)

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

_OWN_OBJECTS = """
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT c.oid::regclass AS name, c.relkind
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = '{schema}'
          AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
          AND pg_get_userbyid(c.relowner) <> '{role}'
          AND NOT EXISTS (  -- serial and identity sequences follow their table
              SELECT 1 FROM pg_depend d
              WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                AND d.deptype IN ('a', 'i'))
    LOOP
        EXECUTE format(
            'ALTER %s %s OWNER TO %I',
            CASE r.relkind
                WHEN 'v' THEN 'VIEW'
                WHEN 'm' THEN 'MATERIALIZED VIEW'
                WHEN 'f' THEN 'FOREIGN TABLE'
                WHEN 'S' THEN 'SEQUENCE'
                ELSE 'TABLE'
            END,
            r.name, '{role}');
    END LOOP;
    FOR r IN
        SELECT p.oid::regprocedure AS name
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = '{schema}' AND pg_get_userbyid(p.proowner) <> '{role}'
    LOOP
        EXECUTE format('ALTER ROUTINE %s OWNER TO %I', r.name, '{role}');
    END LOOP;
    FOR r IN
        SELECT t.oid::regtype AS name
        FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname = '{schema}' AND pg_get_userbyid(t.typowner) <> '{role}'
          AND t.typtype IN ('e', 'd', 'r', 'm')
    LOOP
        EXECUTE format('ALTER TYPE %s OWNER TO %I', r.name, '{role}');
    END LOOP;
END
$do$
"""


_LACKS_PUBLIC = """
SELECT NOT has_schema_privilege(oid, 'public', 'USAGE') FROM pg_roles WHERE rolname = $1
"""


def role_dsn(admin_dsn: str, role: str, password: str) -> str:
    """The admin DSN with `role`'s login instead: same host, port, database and options."""
    parts = urlsplit(admin_dsn)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{quote(role, safe='')}:{quote(password, safe='')}@{host}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _check(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ConfigurationError(f"invalid role or schema name {name!r}")
    return name


async def ensure_roles(
    admin_dsn: str,
    passwords: Mapping[str, str],
    extensions: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """For each `role -> password`: a login role of that name owning the schema of that name,
    with CONNECT/TEMPORARY/CREATE on the database and nothing on other schemas. PUBLIC loses
    its default rights on the database and on the `public` schema. Then `extensions` (role ->
    the extensions its schema uses) as `ensure_extensions` makes them."""
    conn = await _admin(admin_dsn, "to set up roles")
    try:
        database = _check_database(await conn.fetchval("SELECT current_database()"))
        await conn.execute(f'REVOKE ALL ON DATABASE "{database}" FROM PUBLIC')
        await conn.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC")
        for role, password in passwords.items():
            await _ensure_role(conn, database, _check(role), password)
        await _ensure_extensions(conn, extensions or {})
    finally:
        await conn.close()


async def ensure_extensions(dsn: str, extensions: Mapping[str, Sequence[str]]) -> list[str]:
    """Create each extension of `extensions` (role -> names) in `public` unless it exists, and
    let each role that uses one see `public`. Idempotent; the extensions it could not create
    (not shipped with this server, or `dsn` is no administrator) are returned and logged, never
    raised: a service runs without them, less well."""
    conn = await _admin(dsn, "to create extensions")
    try:
        return await _ensure_extensions(conn, extensions)
    finally:
        await conn.close()


async def _admin(dsn: str, why: str) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(dsn)
    except (OSError, asyncpg.PostgresError) as exc:
        reason = redact(f"{type(exc).__name__}: {exc}", dsn)
        raise ConfigurationError(
            f"cannot connect to Postgres at {describe_dsn(dsn)} {why}: {reason}"
        ) from None


async def _ensure_extensions(
    conn: asyncpg.Connection, extensions: Mapping[str, Sequence[str]]
) -> list[str]:
    missing: list[str] = []
    for name in sorted({e for names in extensions.values() for e in names}):
        users = [_check(role) for role, names in extensions.items() if name in names]
        if not await _ensure_extension(conn, _check(name), users):
            missing.append(name)
    return missing


async def _ensure_extension(conn: asyncpg.Connection, name: str, roles: Sequence[str]) -> bool:
    try:
        async with conn.transaction():
            await conn.execute(f'CREATE EXTENSION IF NOT EXISTS "{name}" SCHEMA public')
            for role in roles:
                if await conn.fetchval(_LACKS_PUBLIC, role):
                    await conn.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
    except asyncpg.PostgresError as exc:
        log.warning("extension_unavailable", extension=name, error=f"{type(exc).__name__}: {exc}")
        return False
    return True


def _check_database(name: str) -> str:
    if '"' in name:
        raise ConfigurationError(f"unsupported database name {name!r}")
    return name


async def _ensure_role(conn: asyncpg.Connection, database: str, role: str, password: str) -> None:
    literal = await conn.fetchval("SELECT quote_literal($1)", password)
    attributes = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
    async with conn.transaction():
        await conn.execute("SET LOCAL password_encryption = 'scram-sha-256'")
        exists = await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role)
        verb = "ALTER" if exists else "CREATE"
        await conn.execute(f'{verb} ROLE "{role}" WITH {attributes} PASSWORD {literal}')
        await conn.execute(f'GRANT CONNECT, TEMPORARY, CREATE ON DATABASE "{database}" TO "{role}"')
        schema = await conn.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", role)
        if schema:
            await conn.execute(f'ALTER SCHEMA "{role}" OWNER TO "{role}"')
            await conn.execute(_OWN_OBJECTS.format(schema=role, role=role))
        else:
            await conn.execute(f'CREATE SCHEMA "{role}" AUTHORIZATION "{role}"')
        await conn.execute(f'REVOKE ALL ON SCHEMA "{role}" FROM PUBLIC')
