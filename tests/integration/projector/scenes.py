"""Conversations and snapshots shared by the projector's integration tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tavern_events.envelope import SessionEvent
from tavern_events.ids import new_id
from tavern_events.message import (
    AssistantMessage,
    AssistantMessagePayload,
    UserMessage,
    UserMessagePayload,
)
from tavern_events.session import SessionCreated, SessionCreatedPayload
from tavern_events.step import StepEnded, StepStarted
from tavern_events.turn import TurnEnded, TurnEndedPayload, TurnStarted, TurnStartedPayload
from tavern_runtime.cards import importer
from tests.integration.projector.conftest import Projector

CARDS = Path(__file__).resolve().parents[2] / "fixtures" / "cards"
TABLES = {
    "chats": "session_id",
    "history": "session_id, seq",
    "sessions": "session_id",
    "session_events": "stream_seq",
}


async def import_fixture(projector: Projector, name: str) -> str:
    data_dir = projector.settings.data_dir
    published = await importer.import_file(projector.bus.js, CARDS / name, data_dir)
    return published.asset.asset_id


async def converse(projector: Projector, *, fork: bool = True) -> dict[str, Any]:
    """Two turns in s1 (character Mira), then (optionally) a fork s2 of s1 with one turn."""
    character = await import_fixture(projector, "v2_mira.png")
    await projector.caught_up("assets")
    await projector.create_session("s1", character_id=character)
    await projector.bus.engine()
    await projector.bus.say("s1", "Hello, is anyone here? 灯塔的门开着吗")
    first = await projector.bus.turns_ended("s1", 1)
    await projector.bus.say("s1", "Tell me about the lighthouse keeper.")
    log = await projector.bus.turns_ended("s1", 2)
    if fork:
        at = first[-1].seq
        payload = SessionCreatedPayload(
            architecture="agent-tavern",
            context_mode="dsh-native",
            chat_id="s2",
            character_id=character,
            parent_session_id="s1",
            forked_at_seq=at,
        )
        created = SessionCreated(
            id=new_id(), session_id="s2", ts=datetime.now(UTC), payload=payload
        )
        await projector.append("s2", created)
        await projector.bus.say("s2", "What if I had stayed outside?")
        await projector.bus.turns_ended("s2", 1)
    await projector.caught_up()
    return {"character": character, "log": log}


async def scripted_turn(
    projector: Projector, session_id: str, turn: int, said: str, reply: str
) -> list[SessionEvent]:
    """One turn appended directly to the log (no model): the words are exactly these."""
    now = datetime.now(UTC)
    common: dict[str, Any] = {"session_id": session_id, "ts": now, "turn": turn}
    events: list[SessionEvent] = [
        TurnStarted(id=new_id(), payload=TurnStartedPayload(), **common),
        StepStarted(id=new_id(), step=1, **common),
        UserMessage(
            id=new_id(), step=1, source="user", payload=UserMessagePayload(text=said), **common
        ),
        AssistantMessage(
            id=new_id(),
            step=1,
            payload=AssistantMessagePayload(content=reply, provider="offline", model="m"),
            **common,
        ),
        StepEnded(id=new_id(), step=1, **common),
        TurnEnded(id=new_id(), payload=TurnEndedPayload(outcome="completed", steps=1), **common),
    ]
    await projector.append(session_id, *events)
    writer_log = await projector.bus.log(session_id)
    return writer_log[-len(events) :]


def files(root: Path, pattern: str = "*.jsonl") -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob(pattern))}


async def tables(projector: Projector) -> dict[str, list[dict[str, Any]]]:
    """Every session read model, minus bookkeeping times."""
    found = {}
    async with projector.pool.acquire() as conn:
        for table, key in TABLES.items():
            rows = await conn.fetch(f"SELECT * FROM projector.{table} ORDER BY {key}")
            found[table] = [{k: _plain(v) for k, v in r.items() if k != "updated_at"} for r in rows]
    return found


def _plain(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) and value[:1] in "{[" else value
