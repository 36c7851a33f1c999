"""A backlog of many sessions drains through `ledger-ingest` and `ledger-bindings` at once, both
claiming the sessions' scopes, with no deadlock: each transaction claims its scopes in one
statement, in key order."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg
import nats
import pytest
from structlog.testing import capture_logs

from tavern_events.envelope import SessionEvent
from tavern_events.union import encode, subject_for
from tavern_ledger import app as ledger_app
from tavern_ledger.handlers.stores import BINDINGS_CONSUMER
from tavern_ledger.scopes import owners
from tavern_runtime.migrations import migrate
from tests.integration.ledger.conftest import _provisioned, ledger_settings
from tests.integration.services.conftest import running_service
from tests.support import eventually
from tests.unit.ledger.builders import session_created, user_message

pytestmark = pytest.mark.integration

SESSIONS = 400
MESSAGES = 1
"""User messages of each session, said right after it was created."""
FAILED_BATCH = ("batch_failed", "ingest_batch_rejected", "store_bindings_batch_rejected")
"""What the consumers log of a batch that failed (retried whole, or one event at a time)."""


def _backlog() -> list[SessionEvent]:
    """Session after session, each created and then spoken in (as a host feeds a chat's
    sessions); chat ids sort in the opposite order of their creation, so that a claim in stream
    order and one in key order would meet head on."""
    return [
        event
        for i in range(SESSIONS)
        for event in [
            session_created(f"s{i:03d}", chat_id=f"chat-{SESSIONS - i:03d}", character_id="c"),
            *[
                user_message(f"s{i:03d}", seq, f"I keep note {seq} of session {i} about tea")
                for seq in range(2, MESSAGES + 2)
            ],
        ]
    ]


async def _publish(nats_url: str, events: list[SessionEvent]) -> int:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream(timeout=30)
        acks = await asyncio.gather(
            *[await js.publish_async(subject_for(e), encode(e)) for e in events]
        )
        return int(acks[-1].seq)
    finally:
        await nc.close()


async def _drained(db: Any, js: Any, last: int) -> bool:
    checkpoint = await db.fetchval(
        "SELECT stream_seq FROM ledger.ingest_checkpoint WHERE consumer = 'ledger-ingest'"
    )
    info = await js.consumer_info("SESSIONS", BINDINGS_CONSUMER.name)
    bound = await db.fetchval("SELECT count(*) FROM ledger.session_binding")
    return bool(
        (checkpoint or 0) >= last
        and info.num_pending == 0
        and info.num_ack_pending == 0
        and bound == SESSIONS
    )


async def _deadlocks(db: Any) -> int:
    """Deadlocks Postgres detected in this test's database."""
    found = await db.fetchval(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
    )
    return int(found or 0)


async def _alone(db: Any) -> bool:
    """No other connection to this test's database: a backend reports its counts as it exits."""
    others = await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid()"
    )
    return bool(others == 0)


async def test_a_concurrent_backlog_drains_through_ingest_and_bindings_without_a_deadlock(
    tmp_path: Path, nats_url: str, database_url: str
) -> None:
    await _provisioned(nats_url)
    events = _backlog()
    half = len(events) // 4
    await _publish(nats_url, events[:half])  # a backlog stored before the ledger starts
    settings = ledger_settings(tmp_path, nats_url, database_url)
    nc = await nats.connect(nats_url)
    db = await asyncpg.connect(database_url)
    try:
        with capture_logs() as logs:
            async with running_service("ledger", settings):
                last = await _publish(nats_url, events[half:])  # and more while it drains
                await eventually(lambda: _drained(db, nc.jetstream(), last), timeout=90)
        failed = [
            e for e in logs if e["event"] in ("batch_failed", "store_bindings_batch_rejected")
        ]
        assert failed == []
        await eventually(lambda: _alone(db), timeout=10)  # the ledger's backends reported
        assert await _deadlocks(db) == 0
        owners = await db.fetchval(
            "SELECT count(*) FROM ledger.scope_owner WHERE scope_id LIKE 'chat-%'"
        )
        assert owners == SESSIONS
    finally:
        await db.close()
        await nc.close()


async def test_a_scope_named_by_two_claims_of_one_statement_goes_to_the_first(
    database_url: str,
) -> None:
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=1)
    try:
        await migrate(pool, ledger_app.migrations())
        async with pool.acquire() as conn:
            await owners.claim_all(conn, [("ren", ["chat-b", "chat-a"])])
            await owners.claim_all(
                conn, [("mira", ["chat-z", "chat-a", "global"]), ("ren", ["chat-z", None])]
            )
            found = await conn.fetch("SELECT scope_id, owner FROM ledger.scope_owner")
    finally:
        await pool.close()
    assert sorted((r["scope_id"], r["owner"]) for r in found) == [
        ("chat-a", "ren"),  # claimed before: claims never move
        ("chat-b", "ren"),
        ("chat-z", "mira"),  # the first of the statement's two claims
    ]
