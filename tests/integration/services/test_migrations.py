"""The migration runner against a real, fresh database per test."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tavern_runtime import pg
from tavern_runtime.migrations import Migration, MigrationError, migrate, migration_set

pytestmark = pytest.mark.integration

TWO = migration_set(
    "sample",
    [
        Migration(1, "init", "CREATE SCHEMA IF NOT EXISTS sample;"),
        Migration(2, "items", "CREATE TABLE sample.items (id int PRIMARY KEY, name text);"),
    ],
)


async def _versions(pool: pg.Pool) -> list[tuple[int, str]]:
    rows = await pool.fetch("SELECT version, name FROM sample.schema_version ORDER BY version")
    return [(r["version"], r["name"]) for r in rows]


@pytest.fixture
async def pool(database_url: str):  # type: ignore[no-untyped-def]
    created = await pg.create_pool(database_url, max_size=12)
    yield created
    await created.close()


async def test_fresh_database_gets_every_migration_in_order(pool: pg.Pool) -> None:
    report = await migrate(pool, TWO)
    assert (report.before, report.after, report.applied) == (0, 2, ("001_init", "002_items"))
    assert await _versions(pool) == [(1, "init"), (2, "items")]
    await pool.execute("INSERT INTO sample.items VALUES (1, 'mug')")


async def test_migrating_twice_is_a_no_op(pool: pg.Pool) -> None:
    await migrate(pool, TWO)
    applied_at = await pool.fetchval("SELECT max(applied_at) FROM sample.schema_version")
    again = await migrate(pool, TWO)
    assert not again.changed
    assert (again.before, again.after) == (2, 2)
    assert await pool.fetchval("SELECT max(applied_at) FROM sample.schema_version") == applied_at


async def test_a_later_release_applies_only_its_new_migration(pool: pg.Pool) -> None:
    await migrate(pool, migration_set("sample", TWO.migrations[:1]))
    report = await migrate(pool, TWO)
    assert report.applied == ("002_items",)


async def test_schema_newer_than_the_code_is_refused(pool: pg.Pool) -> None:
    await migrate(pool, TWO)
    older_code = migration_set("sample", TWO.migrations[:1])
    with pytest.raises(MigrationError, match="at version 2 but this code knows only up to 1"):
        await migrate(pool, older_code)


async def test_edited_applied_migration_is_refused(pool: pg.Pool) -> None:
    await migrate(pool, TWO)
    edited = migration_set(
        "sample", [TWO.migrations[0], Migration(2, "items", "CREATE TABLE sample.items (id int);")]
    )
    with pytest.raises(MigrationError, match="002_items was changed"):
        await migrate(pool, edited)


async def test_failing_migration_rolls_back_and_records_nothing(pool: pg.Pool) -> None:
    broken = migration_set(
        "sample",
        [
            TWO.migrations[0],
            Migration(2, "half", "CREATE TABLE sample.half (id int); SELECT no_such_function();"),
        ],
    )
    with pytest.raises(asyncpg.UndefinedFunctionError):
        await migrate(pool, broken)
    assert await _versions(pool) == [(1, "init")]
    assert await pool.fetchval("SELECT to_regclass('sample.half')") is None
    assert (await migrate(pool, TWO)).applied == ("002_items",)  # the lock was released


async def test_replicas_starting_at_once_apply_each_migration_once(database_url: str) -> None:
    pools = [await pg.create_pool(database_url, max_size=1) for _ in range(6)]
    try:
        reports = await asyncio.gather(*(migrate(p, TWO) for p in pools))
    finally:
        await asyncio.gather(*(p.close() for p in pools))
    assert sorted(len(r.applied) for r in reports) == [0, 0, 0, 0, 0, 2]


async def test_unreachable_postgres_error_names_the_host_not_the_password() -> None:
    from tavern_runtime.embedded import free_port

    port = free_port()
    with pytest.raises(pg.DatabaseUnavailable) as error:
        await pg.create_pool(f"postgresql://tavern:hunter2@127.0.0.1:{port}/tavern")
    assert f"127.0.0.1:{port}/tavern" in error.value.message
    assert "hunter2" not in str(error.value)
