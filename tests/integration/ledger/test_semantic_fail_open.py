"""The semantic channel fails open: a channel that hangs past its deadline or raises leaves
recall with its lexical candidates, never an error or a stalled step."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

import pytest

from tavern_ledger import app as ledger_app
from tavern_ledger.domain.ids import content_hash, evidence_id, js_json, session_source_ref
from tavern_ledger.domain.records import EvidenceRow
from tavern_ledger.evidence import rows as evidence_store
from tavern_ledger.recall import recaller as recall_module
from tavern_ledger.recall.recaller import Recaller, RecallRequest
from tavern_ledger.semantic import SemanticHit
from tavern_runtime import pg
from tavern_runtime.migrations import migrate

pytestmark = pytest.mark.integration

SESSION = "sem-s1"
TEXT = "My sailing boat Nautilus is a blue sloop"


class _Hanging:
    async def search(self, scope_id: str, query: str, limit: int) -> Sequence[SemanticHit]:
        await asyncio.sleep(3600)
        return ()

    async def index(self, rows: Sequence[EvidenceRow]) -> None:
        return None


class _Broken(_Hanging):
    async def search(self, scope_id: str, query: str, limit: int) -> Sequence[SemanticHit]:
        raise RuntimeError("index offline")


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[pg.Pool]:
    created = await pg.create_pool(database_url, max_size=2)
    try:
        await migrate(created, ledger_app.migrations())
        ref = session_source_ref(SESSION, 1)
        digest = content_hash(TEXT)
        row = EvidenceRow(
            id=evidence_id(ref, digest),
            scope_id=SESSION,  # a session ingestion has not bound is its own scope
            session_id=SESSION,
            source_class="user_input",
            authority="user_explicit",
            claim_domain="user_fact",
            content=TEXT,
            content_hash=digest,
            observed_at=datetime.now(UTC),
            confidence=0.9,
            source_ref=js_json(ref),
            source_label="user",
            ingest="session-event",
            tokens=9,
        )
        async with created.acquire() as conn:
            await evidence_store.insert(conn, [row])
        yield created
    finally:
        await created.close()


@pytest.mark.parametrize("semantic", [_Hanging(), _Broken()], ids=["hanging", "broken"])
async def test_recall_keeps_its_lexical_hits_when_the_semantic_channel_fails(
    pool: pg.Pool, semantic: _Hanging, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recall_module, "SEMANTIC_TIMEOUT_S", 0.2)
    recaller = Recaller(lambda: pool, semantic=semantic)
    started = time.monotonic()
    reply = await recaller.recall(RecallRequest(SESSION, "tell me about Nautilus the sloop"))
    assert time.monotonic() - started < 2.0
    assert reply["count"] == 1
    assert "Nautilus" in reply["text"]
