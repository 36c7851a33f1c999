"""The projector's figures: replaying the chat projection from SESSIONS beside a raw pull
consume of as many messages, and SillyTavern lorebook activation (1,000 entries, 20 messages).

The chat replay needs Postgres beside the paired nats-server (`default` kind, like its
baseline): one embedded PostgreSQL is started for the whole bench run, a database per run.
"""

from __future__ import annotations

import asyncio
import atexit
import random
import shutil
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg
import nats

from bench.baselines import WINDOW
from bench.registry import Env, Result, baseline, figure
from tavern_events import streams, subjects
from tavern_events.envelope import SessionEvent
from tavern_events.message import (
    AssistantMessage,
    AssistantMessagePayload,
    UserMessage,
    UserMessagePayload,
)
from tavern_events.session import SessionCreated, SessionCreatedPayload
from tavern_events.union import encode
from tavern_projector.app import migrations
from tavern_projector.domain import activation
from tavern_projector.framework import Target
from tavern_projector.projections.chat import FLUSH_EVERY, ChatProjection
from tavern_projector.rebuild import Reader, rebuild_all
from tavern_runtime import pg
from tavern_runtime.cards import lorebook
from tavern_runtime.cards.fields import Fields
from tavern_runtime.embedded import EmbeddedPostgres
from tavern_runtime.migrations import migrate
from tavern_runtime.provision import provision

TURNS_PER_SESSION = 100
WORDS = [
    "lantern",
    "storm",
    "keeper",
    "harbour",
    "ferry",
    "tide",
    "beacon",
    "cliff",
    "rope",
    "gull",
    "salt",
    "oar",
]
_POSTGRES: list[EmbeddedPostgres] = []


def _postgres_dsn() -> str:
    """One embedded PostgreSQL for the whole run (started on first use, stopped at exit)."""
    if not _POSTGRES:
        root = Path(tempfile.mkdtemp(prefix="tavern-bench-projector-"))
        server = EmbeddedPostgres(root)
        server.start()
        _POSTGRES.append(server)

        def stop() -> None:
            server.stop()
            shutil.rmtree(root, ignore_errors=True)

        atexit.register(stop)
    return _POSTGRES[0].dsn


async def _fresh_database() -> str:
    dsn = _postgres_dsn()
    name = f"bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    finally:
        await admin.close()
    return pg.with_database(dsn, name)


def conversation(session_id: str, turns: int, start: datetime) -> list[SessionEvent]:
    """A session/created, then `turns` user/assistant pairs (about 100-character texts)."""
    rng = random.Random(session_id)
    created = SessionCreatedPayload(
        architecture="agent-tavern", context_mode="dsh-native", chat_id=session_id
    )
    events: list[SessionEvent] = [
        SessionCreated(
            id=str(uuid.uuid4()), session_id=session_id, seq=1, ts=start, payload=created
        )
    ]
    for turn in range(1, turns + 1):
        ts = start + timedelta(seconds=turn)
        text = " ".join(rng.choices(WORDS, k=16))
        common: dict[str, Any] = {"session_id": session_id, "ts": ts, "turn": turn, "step": 1}
        events.append(
            UserMessage(
                id=str(uuid.uuid4()),
                seq=len(events) + 1,
                source="user",
                payload=UserMessagePayload(text=text),
                **common,
            )
        )
        reply = AssistantMessagePayload(content=text.upper(), provider="bench", model="m")
        events.append(
            AssistantMessage(id=str(uuid.uuid4()), seq=len(events) + 1, payload=reply, **common)
        )
    return events


async def _publish_sessions(js: Any, n: int) -> int:
    per_session = 1 + 2 * TURNS_PER_SESSION
    start = datetime(2026, 3, 2, tzinfo=UTC)
    pending = []
    for index in range(max(1, n // per_session)):
        session_id = f"bench-{index}"
        for event in conversation(session_id, TURNS_PER_SESSION, start):
            pending.append((subjects.session_event(session_id, event.type), encode(event)))
    for first in range(0, len(pending), WINDOW):
        window = pending[first : first + WINDOW]
        futures = [await js.publish_async(subject, body) for subject, body in window]
        await asyncio.wait_for(asyncio.gather(*futures), timeout=30)
    return len(pending)


@figure(
    "projector_chat_replay",
    baseline="consume_pull",
    servers=("default",),
    count=20000,
    goal=0.5,
    description="`tavern replay chat`: SESSIONS -> decoded events -> SillyTavern JSONL files, "
    "shadow then swap (100-turn sessions)",
)
async def projector_chat_replay(env: Env, n: int) -> Result:
    nc = await nats.connect(env.nats_url, name="bench")
    chats = Path(tempfile.mkdtemp(prefix="tavern-bench-chats-")) / "chats"
    pool = await asyncpg.create_pool(await _fresh_database(), min_size=1, max_size=2)
    try:
        js = nc.jetstream(timeout=30)
        await provision(js, stream_specs=[streams.SESSIONS], buckets=())
        await migrate(pool, migrations())
        await _publish_sessions(js, n)
        projection = ChatProjection(ZoneInfo("UTC"), flush_every=FLUSH_EVERY)
        started = time.perf_counter()
        report = await rebuild_all(pool, Reader(js, pool, push=True), projection, Target(chats))
        return Result(report.entries, time.perf_counter() - started)
    finally:
        await pool.close()
        await nc.close()
        shutil.rmtree(chats.parent, ignore_errors=True)


def lore_book(entries: int) -> activation.Book:
    rng = random.Random(1)
    found = []
    for uid in range(entries):
        raw = {
            "key": [f"{rng.choice(WORDS)}{uid % 50}", f"name{uid}"],
            "keysecondary": [rng.choice(WORDS)] if uid % 3 == 0 else [],
            "selectiveLogic": uid % 4,
            "content": f"Lore entry {uid}: " + " ".join(rng.choices(WORDS, k=20)),
            "order": rng.randint(0, 200),
            "matchWholeWords": uid % 5 == 0,
            "probability": 80 if uid % 7 == 0 else 100,
        }
        found.append(lorebook.entry(Fields(raw, f"entries.{uid}"), uid))
    return activation.Book("bench", found)


def lore_chat(messages: int) -> list[activation.Message]:
    rng = random.Random(2)
    return [
        activation.Message(
            "Ren" if i % 2 else "Mira",
            " ".join(f"{rng.choice(WORDS)}{rng.randint(0, 60)}" for _ in range(30)),
        )
        for i in range(messages)
    ]


@baseline(
    "lore_activation",
    servers=("default",),
    count=200,
    description="pure CPU: keyword activation of 1,000 lorebook entries over 20 messages "
    "(scan depth 20, seeded rolls); latency per activation",
)
async def lore_activation(env: Env, n: int) -> Result:
    books, chat = [lore_book(1000)], lore_chat(20)
    settings = activation.ScanSettings(scan_depth=20, token_budget=4000)
    latencies = []
    started = time.perf_counter()
    for i in range(n):
        began = time.perf_counter()
        activation.activate(books, chat, settings, random.Random(i).random)
        latencies.append((time.perf_counter() - began) * 1000)
        await asyncio.sleep(0)
    return Result(n, time.perf_counter() - started, tuple(latencies))
