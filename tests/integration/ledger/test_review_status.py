"""Review status words over the bus (acp.md §10): a quarantine's reason is the status it stores,
a rollback writes `rolled_back`, and rows stored with the old word are rewritten by migration."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from tavern_ledger.app import migrations
from tavern_runtime import pg
from tavern_runtime.migrations import migrate, migration_set
from tests.integration.ledger.conftest import LedgerBus
from tests.integration.ledger.test_cli import tavern_ledger
from tests.unit.ledger.builders import session_created, user_message

pytestmark = pytest.mark.integration


async def _one_row(ledger: LedgerBus, text: str) -> str:
    await ledger.ingested_through(await ledger.publish(session_created("s1")))
    await ledger.ingested_through(await ledger.publish(user_message("s1", 2, text)))
    [row] = await ledger.evidence(session_id="s1")
    return str(row["id"])


async def _status(ledger: LedgerBus, evidence_id: str) -> Any:
    inspected = await ledger.rpc("inspect", evidence_id=evidence_id)
    return inspected["metadata"].get("reviewStatus")


async def test_quarantine_for_review_stores_needs_review(ledger: LedgerBus) -> None:
    evidence_id = await _one_row(ledger, "I live in Lyon")
    code, out = await tavern_ledger(ledger, "quarantine", evidence_id, "--reason", "needs_review")
    assert code == 0
    assert json.loads(out)["to_state"] == "quarantined"
    assert await _status(ledger, evidence_id) == "needs_review"
    code, out = await tavern_ledger(ledger, "rollback", evidence_id)
    assert code == 0
    assert await _status(ledger, evidence_id) == "rolled_back"


async def test_quarantine_without_a_reason_and_rollback_use_their_own_words(
    ledger: LedgerBus,
) -> None:
    evidence_id = await _one_row(ledger, "I live in Lyon")
    await ledger.rpc("quarantine", evidence_id=evidence_id)
    assert await _status(ledger, evidence_id) == "quarantined_by_user"
    reply = await ledger.rpc("rollback", evidence_id=evidence_id)
    assert reply["to_state"] == "active"
    assert await _status(ledger, evidence_id) == "rolled_back"
    stored = await ledger.db.fetchval(
        "SELECT metadata->>'reviewStatus' FROM ledger.evidence WHERE id = $1", evidence_id
    )
    assert stored == "rolled_back"


@pytest.fixture
async def schema_at_7(postgres_server: str) -> AsyncIterator[Any]:
    """A fresh database whose ledger schema stops at migration 007."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(postgres_server)
    await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    dsn = pg.with_database(postgres_server, name)
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    try:
        known = migrations()
        await migrate(pool, migration_set(known.schema, known.migrations[:7]))
        yield pool
    finally:
        await pool.close()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def test_rows_stored_as_rollbackd_are_rewritten_by_the_migration(schema_at_7: Any) -> None:
    insert = (
        "INSERT INTO ledger.evidence (id, scope_id, session_id, source_class, authority, "
        "confidence, durability, sensitivity, claim_domain, content, content_hash, metadata, "
        "observed_at) VALUES ($1, 'c1', 's1', 'user_input', 'user_explicit', 0.9, 0.5, "
        "'private', 'user_fact', $2, $3, $4::jsonb, now())"
    )
    old = json.dumps({"reviewStatus": "rollbackd", "ttlDays": 3})
    kept = json.dumps({"reviewStatus": "released"})
    async with schema_at_7.acquire() as conn:
        await conn.execute(insert, "ev_old", "I live in Lyon", "a" * 64, old)
        await conn.execute(insert, "ev_kept", "I live in Paris", "b" * 64, kept)
    await migrate(schema_at_7, migrations())
    async with schema_at_7.acquire() as conn:
        rows = await conn.fetch("SELECT id, metadata FROM ledger.evidence ORDER BY id")
    found = {r["id"]: json.loads(r["metadata"]) for r in rows}
    assert found == {
        "ev_kept": {"reviewStatus": "released"},
        "ev_old": {"reviewStatus": "rolled_back", "ttlDays": 3},
    }
