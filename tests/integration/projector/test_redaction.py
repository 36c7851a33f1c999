"""A redaction in the ledger removes the content from every projection (the archive keeps
the event and records the redaction)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tavern_events import subjects
from tavern_events.envelope import LedgerFact, SessionEvent
from tavern_events.ids import new_id
from tavern_events.ledger import (
    EvidenceAppended,
    EvidenceAppendedPayload,
    EvidenceOrigin,
    EvidenceStateChanged,
    EvidenceStateChangedPayload,
    MemoryChanged,
    MemoryChangedPayload,
)
from tavern_events.message import UserMessage
from tavern_events.streams import LEDGER
from tavern_events.union import encode
from tavern_projector import operations
from tavern_projector.core import options_of
from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import import_fixture, scripted_turn

pytestmark = pytest.mark.integration

SECRET = "My locker code is 4417, 密码是青鸟"
HASH = "a" * 64


async def publish(projector: Projector, fact: LedgerFact) -> None:
    await projector.bus.js.publish(
        subjects.ledger_fact(fact.scope_id, fact.type),
        encode(fact),
        stream=LEDGER.name,
        headers={"Nats-Msg-Id": fact.id},
    )


def evidence(said: SessionEvent) -> EvidenceAppended:
    origin = EvidenceOrigin(session_id=said.session_id, seq=said.seq, event_id=said.id)
    payload = EvidenceAppendedPayload(
        evidence_id="e1",
        content_hash=HASH,
        text=SECRET,
        authority="user_explicit",
        claim_domain="user_fact",
        state="active",
        ingest="session-event",
        origin=origin,
    )
    return EvidenceAppended(id=new_id(), scope_id="s1", ts=datetime.now(UTC), payload=payload)


def memory(op: str, content: str | None) -> MemoryChanged:
    payload = MemoryChangedPayload(
        memory_id="m1", scope="chat", op=op, content=content, tags=("locker",), revision=new_id()
    )
    return MemoryChanged(id=new_id(), scope_id="s1", ts=datetime.now(UTC), payload=payload)


def redacted() -> EvidenceStateChanged:
    payload = EvidenceStateChangedPayload(
        evidence_id="e1", from_state="active", to_state="redacted", reason="user asked"
    )
    return EvidenceStateChanged(id=new_id(), scope_id="s1", ts=datetime.now(UTC), payload=payload)


async def search(projector: Projector, query: str) -> list[int]:
    found = await projector.rpc("history.search", {"session_id": "s1", "query": query})
    return [hit["seq"] for hit in found["hits"]]


async def indexed(projector: Projector, table: str, token: str) -> int:
    async with projector.pool.acquire() as conn:
        return int(
            await conn.fetchval(
                f"SELECT count(*) FROM projector.{table} WHERE tokens @> $1", [token]
            )
        )


async def test_a_redacted_memory_disappears_from_every_projection(projector: Projector) -> None:
    character = await import_fixture(projector, "v2_mira.png")
    await projector.caught_up("assets")
    await projector.create_session("s1", character_id=character)
    log = await scripted_turn(projector, "s1", 1, SECRET, "Noted. I will keep it to myself.")
    said = next(e for e in log if isinstance(e, UserMessage))
    await publish(projector, evidence(said))
    await publish(projector, memory("written", "The locker code is 4417"))
    await projector.caught_up()
    assert await search(projector, "locker code") == [said.seq]
    assert await search(projector, "青鸟") == [said.seq]
    assert await indexed(projector, "evidence", "4417") == 1
    assert await indexed(projector, "memories", "4417") == 1

    await publish(projector, redacted())
    await publish(projector, memory("forgotten", None))
    await projector.caught_up()
    await _assert_gone(projector, said)

    # Rebuilding the projections from the log does not bring the content back.
    options = options_of(projector.settings)
    for name in ("history", "chat"):
        await operations.replay(
            projector.pool, projector.bus.js, options, operations.plan(name), lambda n: None
        )
    await _assert_gone(projector, said)


async def _assert_gone(projector: Projector, said: SessionEvent) -> None:
    assert await search(projector, "locker code") == []
    assert await search(projector, "青鸟") == []
    assert await indexed(projector, "evidence", "4417") == 0
    assert await indexed(projector, "memories", "4417") == 0
    async with projector.pool.acquire() as conn:
        mem = await conn.fetchrow(
            "SELECT content, state FROM projector.memories WHERE memory_id = 'm1'"
        )
        ev = await conn.fetchrow(
            "SELECT text, state FROM projector.evidence WHERE evidence_id = 'e1'"
        )
        archived = await conn.fetchrow(
            "SELECT data, redacted_at, redaction_reason FROM projector.session_events"
            " WHERE session_id = 's1' AND log_seq = $1",
            said.seq,
        )
    assert (mem["content"], mem["state"]) == (None, "forgotten")
    assert (ev["text"], ev["state"]) == ("", "redacted")
    assert archived["redacted_at"] is not None
    assert archived["redaction_reason"] == "user asked"
    assert SECRET.encode() in bytes(archived["data"]), "the archive keeps the event itself"
    chat = projector.chat_file("v2_mira/s1").read_text()
    assert "4417" not in chat
    assert "青鸟" not in chat
    assert '"mes":"[redacted]"' in chat
