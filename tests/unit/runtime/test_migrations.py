"""Migration planning: pure, no database."""

from __future__ import annotations

import pytest

from tavern_runtime.migrations import (
    Applied,
    Migration,
    MigrationError,
    load_migrations,
    migration_set,
    parse_filename,
    plan,
)


def _set(*sqls: str, schema: str = "ledger"):  # type: ignore[no-untyped-def]
    return migration_set(schema, [Migration(i, f"m{i}", sql) for i, sql in enumerate(sqls, 1)])


def _applied(migration: Migration) -> Applied:
    return Applied(migration.version, migration.name, migration.checksum)


def test_fresh_schema_plans_every_migration_in_order() -> None:
    known = _set("SELECT 1", "SELECT 2", "SELECT 3")
    todo = plan(known, [])
    assert todo.current == 0
    assert [m.version for m in todo.pending] == [1, 2, 3]


def test_partly_applied_schema_plans_only_the_rest() -> None:
    known = _set("SELECT 1", "SELECT 2", "SELECT 3")
    todo = plan(known, [_applied(known.migrations[0])])
    assert todo.current == 1
    assert [m.version for m in todo.pending] == [2, 3]


def test_up_to_date_schema_plans_nothing() -> None:
    known = _set("SELECT 1", "SELECT 2")
    assert plan(known, [_applied(m) for m in known.migrations]).pending == ()


def test_schema_newer_than_the_code_is_refused() -> None:
    known = _set("SELECT 1")
    newer = [_applied(known.migrations[0]), Applied(2, "from_the_future", "x")]
    with pytest.raises(MigrationError, match="version 2 but this code knows only up to 1"):
        plan(known, newer)


def test_changed_applied_migration_is_refused() -> None:
    known = _set("SELECT 1", "SELECT 2")
    edited = Applied(1, "m1", Migration(1, "m1", "SELECT 'edited'").checksum)
    with pytest.raises(MigrationError, match="changed after it was applied"):
        plan(known, [edited])


def test_hole_in_applied_versions_is_refused() -> None:
    known = _set("SELECT 1", "SELECT 2", "SELECT 3")
    with pytest.raises(MigrationError, match=r"misses \[2\]"):
        plan(known, [_applied(known.migrations[0]), _applied(known.migrations[2])])


def test_numbering_gap_on_disk_is_refused() -> None:
    with pytest.raises(MigrationError, match="without gaps"):
        migration_set("ledger", [Migration(1, "a", ""), Migration(3, "c", "")])


def test_duplicate_version_on_disk_is_refused() -> None:
    with pytest.raises(MigrationError, match="without gaps"):
        migration_set("ledger", [Migration(1, "a", ""), Migration(1, "b", "")])


@pytest.mark.parametrize("schema", ["Ledger", "ledger;drop", "", "1ledger", "a" * 64])
def test_unsafe_schema_name_is_refused(schema: str) -> None:
    with pytest.raises(MigrationError, match="invalid schema name"):
        migration_set(schema, [])


def test_checksum_ignores_line_endings_only() -> None:
    unix, windows = (
        Migration(1, "a", "SELECT 1;\nSELECT 2;\n"),
        Migration(1, "a", "SELECT 1;\r\nSELECT 2;\r\n"),
    )
    assert unix.checksum == windows.checksum
    assert unix.checksum != Migration(1, "a", "SELECT 1;\nSELECT 3;\n").checksum


@pytest.mark.parametrize(
    ("filename", "parsed"),
    [
        ("001_init.sql", (1, "init")),
        ("012_add_evidence_index.sql", (12, "add_evidence_index")),
        ("1_init.sql", None),
        ("001-init.sql", None),
        ("001_init.sql.bak", None),
        ("README.md", None),
    ],
)
def test_parse_filename(filename: str, parsed: tuple[int, str] | None) -> None:
    assert parse_filename(filename) == parsed


@pytest.mark.parametrize("service", ["ledger", "consolidator", "projector"])
def test_each_database_service_ships_its_init_migration(service: str) -> None:
    known = load_migrations(service, f"tavern_{service}")
    assert known.migrations[0].version == 1
    assert known.migrations[0].name == "init"
    assert f"CREATE SCHEMA IF NOT EXISTS {service}" in known.migrations[0].sql
