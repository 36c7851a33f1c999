"""A durable rewritten behind provisioning's back (issue 48, point 1) is red in `tavern status`
and repaired by `tavern init --apply-drift`, which puts its config back and replays what it
passed over from its reader's checkpoint; on a real nats-server (shipped and embedded config)
and a real PostgreSQL.

The rewrite is done the one way left after the permissions of `tavern_cli.access`: a service
login's bare `$JS.API.CONSUMER.CREATE.SESSIONS` naming the durable in its body."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import asyncpg
import pytest
from nats.js import JetStreamContext

from tavern_cli import catalog, initialise, probes
from tavern_cli.commands.status import Report
from tavern_events.ids import new_id
from tavern_events.message import UserMessage, UserMessagePayload
from tavern_runtime import pg
from tavern_runtime.migrations import migrate
from tavern_runtime.sessionlog import SessionLogWriter
from tests.deploy import test_nats_permissions as permissions
from tests.deploy.test_nats_permissions import Secured

pytestmark = pytest.mark.integration

server = permissions.server  # both configs: deploy/nats/single.conf and the embedded one
secured = permissions.secured

INGEST = "ledger-ingest"


def _said(session_id: str, text: str, turn: int) -> UserMessage:
    return UserMessage(
        id=new_id(),
        session_id=session_id,
        ts=datetime.now(UTC),
        turn=turn,
        source="user",
        payload=UserMessagePayload(text=text),
    )


async def _say(secured: Secured, session_id: str, texts: list[str], after: int) -> None:
    writer = SessionLogWriter(secured.users["loop"].nc)
    for index, text in enumerate(texts):
        seq = after + index
        await writer.append(session_id, [_said(session_id, text, seq + 1)], expected_last=seq)


async def _ledger_schema(database_url: str) -> None:
    migrations = catalog.BY_NAME["ledger"].migrations()
    assert migrations is not None
    pool = await pg.create_pool(database_url, max_size=2)
    try:
        await migrate(pool, migrations)
    finally:
        await pool.close()


async def _commit_checkpoint(database_url: str, stream_seq: int) -> None:
    """What the ledger writes with the rows it ingested, in the same transaction."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "INSERT INTO ledger.ingest_checkpoint (consumer, stream_seq) VALUES ($1, $2)",
            INGEST,
            stream_seq,
        )
    finally:
        await conn.close()


async def _ingest(js: JetStreamContext, most: int) -> list[tuple[int, str]]:
    """(stream seq, text) of what the ledger's durable hands its reader now, acked."""
    pull = await js.pull_subscribe_bind(INGEST, stream="SESSIONS")
    got: list[tuple[int, str]] = []
    try:
        msgs = await pull.fetch(most, timeout=1.5)
    except TimeoutError:
        msgs = []
    for msg in msgs:
        await msg.ack_sync()
        got.append((msg.metadata.sequence.stream, json.loads(msg.data)["payload"]["text"]))
    await pull.unsubscribe()
    return got


async def _hijack(secured: Secured) -> None:
    """A service login rewrites the ledger's durable with a filter that matches nothing."""
    body = {
        "stream_name": "SESSIONS",
        "config": {
            "name": INGEST,
            "description": "hijacked",
            "filter_subject": "tavern.session.nobody.x",
            "ack_policy": "explicit",
            "deliver_policy": "all",
        },
    }
    projector = secured.users["projector"].nc
    subject, data = "$JS.API.CONSUMER.CREATE.SESSIONS", json.dumps(body).encode()
    reply = await projector.request(subject, data, 3)
    assert "error" not in json.loads(reply.data), reply.data


async def _status(secured: Secured) -> tuple[bool, probes.ConsumerRow]:
    state = await probes.probe_nats(secured.users["operator"].nc)
    [row] = [c for c in state.consumers if c.name == INGEST]
    return Report([state.server], state, []).ok, row


async def test_a_rewritten_durable_is_red_and_repair_replays_what_it_passed_over(
    secured: Secured, database_url: str
) -> None:
    await _ledger_schema(database_url)
    ledger = secured.users["ledger"].js
    await _say(secured, "alice", ["I live in Lyon", "my cat is Miso"], after=0)
    before = await _ingest(ledger, 10)
    assert [text for _, text in before] == ["I live in Lyon", "my cat is Miso"]
    await _commit_checkpoint(database_url, before[-1][0])
    green, row = await _status(secured)
    assert green
    assert row.ok

    await _hijack(secured)
    await _say(secured, "alice", ["my sister is Ines", "I am allergic to peanuts"], after=2)
    assert await _ingest(ledger, 10) == []  # passed over while rewritten
    green, row = await _status(secured)
    assert not green
    assert not row.ok
    assert "filter_subjects" in row.detail
    assert "--apply-drift" in row.detail

    report = await initialise.provision_all(
        secured.users["operator"].nc, 1, True, database_url=database_url
    )
    assert report.ok, report.lines()
    assert [line for line in report.lines() if INGEST in line and "replayed" in line]
    replayed = await _ingest(ledger, 10)
    assert [text for _, text in replayed] == ["my sister is Ines", "I am allergic to peanuts"]
    green, row = await _status(secured)
    assert green
    assert row.ok


async def test_without_a_database_the_repair_still_puts_the_config_back(
    secured: Secured,
) -> None:
    await _hijack(secured)
    report = await initialise.provision_all(secured.users["operator"].nc, 1, True)
    assert report.ok, report.lines()
    green, row = await _status(secured)
    assert green
    assert row.ok
