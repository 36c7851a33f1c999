"""The semantic channel of recall, turned on (pgvector, USE multilingual): ingested evidence gets
its vector behind the commit, recall finds it by meaning with no word in common, in its own scope
only; redaction drops the vector; rows with none (an upgrade) or by another model get theirs at
start; a database without the extension runs lexical-only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tavern_events.envelope import SessionEvent
from tavern_ledger import app as ledger_app
from tavern_ledger.domain.ids import content_hash, evidence_id, js_json, session_source_ref
from tavern_ledger.domain.records import EvidenceRow
from tavern_ledger.embedding import MODEL
from tavern_ledger.evidence import rows as evidence_store
from tavern_ledger.vectors import index as vector_index
from tavern_runtime import pg
from tavern_runtime.migrations import migrate
from tests.integration.ledger.conftest import LedgerBus, _answers, _provisioned, ledger_settings
from tests.integration.services.conftest import running_service
from tests.support import eventually, signed_nats
from tests.unit.ledger.builders import session_created, user_message

pytestmark = pytest.mark.integration


@pytest.fixture
def ledger_options() -> dict[str, Any]:
    """The channel is off by default (docs/memory.md): these tests turn it on."""
    return {"ledger_semantic": True}


PORTO = "My sister lives in Porto"
ASKED = "Where is my sibling's home?"
DISTRACTORS = (
    "I had spaghetti for dinner at my office",
    "My train to work was late again this morning",
    "My team won the football match on Sunday",
)
"""Each shares with the question as many words as the Porto statement does ("my")."""


async def _ingest(ledger: LedgerBus, *events: Any) -> None:
    last = 0
    for event in events:
        last = await ledger.publish(event)
    await ledger.ingested_through(last)


async def _vectors(db: Any) -> dict[str, str]:
    rows = await db.fetch("SELECT evidence_id, model FROM ledger.evidence_vector")
    return {r["evidence_id"]: r["model"] for r in rows}


async def _ranked_ids(ledger: LedgerBus, session_id: str, query: str) -> list[str]:
    reply = await ledger.rpc("recall", session_id=session_id, query=query, explain=True)
    return [item["evidence_id"] for item in reply["ranked"]]


async def test_recall_finds_evidence_by_meaning_in_its_own_scope_and_redaction_drops_its_vector(
    ledger: LedgerBus,
) -> None:
    said = [PORTO, *DISTRACTORS]
    events: list[SessionEvent] = [
        session_created("s1", chat_id="chat-a"),
        session_created("s2", chat_id="chat-b"),
    ]
    events += [user_message("s1", i + 2, text) for i, text in enumerate(said)]
    events += [user_message("s2", 2, "Our neighbours painted their fence green")]
    await _ingest(ledger, *events)
    rows = {r["content"]: r["id"] for r in await ledger.evidence(claims=True)}
    porto = rows[PORTO]

    async def embedded() -> bool:
        return set(await _vectors(ledger.db)) == set(rows.values())

    await eventually(embedded, timeout=30)
    assert set((await _vectors(ledger.db)).values()) == {MODEL}

    ranked = await _ranked_ids(ledger, "s1", ASKED)
    assert ranked[0] == porto, ranked  # no word of the question is in it, none of it in the rest
    assert porto not in await _ranked_ids(ledger, "s2", ASKED)  # another chat's memory

    reply = await ledger.rpc("redact", evidence_id=porto, actor="alice", reason="test")
    assert "error" not in reply, reply
    assert porto not in await _vectors(ledger.db)
    assert porto not in await _ranked_ids(ledger, "s1", ASKED)


async def test_a_chinese_statement_is_found_by_an_english_question(ledger: LedgerBus) -> None:
    said = ["我妹妹住在波尔图", *DISTRACTORS]
    events: list[SessionEvent] = [session_created("s1", chat_id="chat-a")]
    events += [user_message("s1", i + 2, text) for i, text in enumerate(said)]
    await _ingest(ledger, *events)
    rows = {r["content"]: r["id"] for r in await ledger.evidence(claims=True)}

    async def embedded() -> bool:
        return len(await _vectors(ledger.db)) == len(rows)

    await eventually(embedded, timeout=30)
    assert (await _ranked_ids(ledger, "s1", ASKED))[0] == rows["我妹妹住在波尔图"]


def _row(session_id: str, seq: int, text: str) -> EvidenceRow:
    ref = session_source_ref(session_id, seq)
    digest = content_hash(text)
    return EvidenceRow(
        id=evidence_id(ref, digest),
        scope_id=session_id,
        session_id=session_id,
        source_class="user_input",
        authority="user_explicit",
        claim_domain="user_fact",
        content=text,
        content_hash=digest,
        observed_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=seq),
        confidence=0.9,
        source_ref=js_json(ref),
        source_label="user",
        ingest="session-event",
    )


@pytest.fixture
async def older_install(database_url: str) -> AsyncIterator[list[EvidenceRow]]:
    """A database whose evidence was stored before it had vectors, one row of which has a
    vector made by another model."""
    rows = [_row("s-old", i + 2, text) for i, text in enumerate([PORTO, *DISTRACTORS])]
    pool = await pg.create_pool(database_url, max_size=2)
    try:
        await migrate(pool, ledger_app.migrations())
        async with pool.acquire() as conn:
            await evidence_store.insert(conn, rows)
            await conn.execute(
                "INSERT INTO ledger.evidence_vector (evidence_id, scope_id, model, embedding) "
                "VALUES ($1, $2, 'an-older-model', array_fill(0.1::real, ARRAY[512])::vector)",
                rows[1].id,
                rows[1].scope_id,
            )
        yield rows
    finally:
        await pool.close()


async def test_start_embeds_rows_without_a_vector_and_rows_of_another_model(
    tmp_path: Path,
    nats_url: str,
    database_url: str,
    older_install: list[EvidenceRow],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vector_index, "BULK_ROWS", 2)  # so many: the graph is built after them
    await _provisioned(nats_url)
    settings = ledger_settings(tmp_path, nats_url, database_url, ledger_semantic=True)
    db = await asyncpg.connect(database_url)
    try:
        async with running_service("ledger", settings):

            async def claims() -> dict[str, str]:
                """Each old message's claim (the ledger cuts them at start), by message id."""
                cut = await db.fetch(
                    "SELECT id, claim_of FROM ledger.evidence WHERE claim_of IS NOT NULL"
                )
                return {r["claim_of"]: r["id"] for r in cut}

            async def rebuilt() -> bool:
                found, claimed = await _vectors(db), await claims()
                return len(claimed) == len(older_install) and all(
                    found.get(c) == MODEL for c in claimed.values()
                )

            await eventually(rebuilt, timeout=30)
            nc = await signed_nats(nats_url)
            try:
                await eventually(lambda: _answers(nc), timeout=10)
                bus = LedgerBus(nc, nc.jetstream(), db)
                porto = (await claims())[older_install[0].id]
                assert (await _ranked_ids(bus, "s-old", ASKED))[0] == porto
                graph = "SELECT to_regclass('ledger.evidence_vector_hnsw') IS NOT NULL"
                assert await db.fetchval(graph)
            finally:
                await nc.close()
    finally:
        await db.close()


async def test_without_the_vector_extension_the_ledger_starts_and_recalls_lexically(
    tmp_path: Path, nats_url: str, database_url: str
) -> None:
    db = await asyncpg.connect(database_url)
    try:
        await db.execute("DROP EXTENSION vector")  # a database of one's own, never given it
        await _provisioned(nats_url)
        settings = ledger_settings(tmp_path, nats_url, database_url, ledger_semantic=True)
        async with running_service("ledger", settings):
            nc = await signed_nats(nats_url)
            try:
                await eventually(lambda: _answers(nc), timeout=10)
                bus = LedgerBus(nc, nc.jetstream(), db)
                await _ingest(bus, session_created("s1"), user_message("s1", 2, PORTO))
                ranked = await _ranked_ids(bus, "s1", "where does my sister live")
                assert [r["id"] for r in await bus.evidence(claims=True)] == ranked
            finally:
                await nc.close()
        assert await db.fetchval("SELECT to_regclass('ledger.evidence_vector')") is None
    finally:
        await db.close()
