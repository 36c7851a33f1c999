"""Batches: the pull loop gathers a turn's events into one, and a batch of many events leaves
the rows and chat files that applying them one by one leaves."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from nats.aio.msg import Msg

from tavern_events.ids import new_id
from tavern_events.message import (
    AssistantMessage,
    AssistantMessagePayload,
    UserMessage,
    UserMessagePayload,
)
from tavern_events.request import AgentRequest, AgentRequestPayload
from tavern_events.streams import SESSIONS
from tavern_projector import catalog
from tavern_projector.chatfiles import ChatFiles
from tavern_projector.chatfiles import revision as file_revision
from tavern_projector.consumer import PullLoop
from tavern_projector.core import options_of
from tavern_projector.framework import Entry
from tavern_projector.runner import LiveRunner
from tavern_projector.sources import Start, stream_batches
from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import files, scripted_turn, tables
from tests.support import eventually


class Recording(LiveRunner):
    """Takes every batch as it comes and applies nothing."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    async def handle(self, msgs: Sequence[Msg]) -> None:
        self.batches.append([m.subject for m in msgs])


def pull_loop(projector: Projector, runner: Recording, **options: Any) -> PullLoop:
    spec = catalog.consumer(catalog.build("sessions", options_of(projector.settings)))
    return PullLoop(runner, spec, lambda: projector.bus.js, **options)


async def ack_pending(projector: Projector) -> int:
    info = await projector.bus.js.consumer_info(SESSIONS.name, catalog.consumer_name("sessions"))
    return int(info.num_ack_pending or 0)


async def test_events_published_within_the_window_come_in_one_batch(
    idle_projector: Projector,
) -> None:
    runner = Recording()
    loop = pull_loop(idle_projector, runner, gather_s=0.5)
    await loop.start()
    try:
        await idle_projector.create_session("g1")
        await asyncio.sleep(0.05)  # the loop holds the first event and gathers
        await scripted_turn(idle_projector, "g1", 1, "Hello?", "Hello.")
        await eventually(lambda: sum(len(b) for b in runner.batches) >= 7, timeout=10)
        assert len(runner.batches) == 1, runner.batches
        assert [s.rsplit(".", 2)[-2:] for s in runner.batches[0]] == [  # the whole stream
            ["session", "created"],
            ["turn", "start"],
            ["step", "start"],
            ["user", "message"],
            ["assistant", "message"],
            ["step", "end"],
            ["turn", "end"],
        ]

        async def acked() -> bool:
            return await ack_pending(idle_projector) == 0

        await eventually(acked, timeout=10)  # each message acked once the batch is handled
    finally:
        await loop.stop(3)


async def test_a_backlog_fills_batches_at_once(idle_projector: Projector) -> None:
    for n in range(3):
        await idle_projector.create_session(f"b{n}")
        await scripted_turn(idle_projector, f"b{n}", 1, "Hi", "Hi")  # 21 messages in all
    runner = Recording()
    loop = pull_loop(idle_projector, runner, batch=4, gather_s=5.0)
    started = time.monotonic()
    await loop.start()
    try:
        await eventually(lambda: sum(len(b) for b in runner.batches) >= 12, timeout=10)
        # full batches never wait for the window (only the last, partial one does)
        assert time.monotonic() - started < 5.0
        assert [len(b) for b in runner.batches[:3]] == [4, 4, 4]
    finally:
        await loop.stop(3)
    assert sum(len(b) for b in runner.batches) == 21  # the stop let the partial batch finish


async def test_a_stop_cuts_the_window_short_and_handles_the_batch_in_hand(
    idle_projector: Projector,
) -> None:
    runner = Recording()
    loop = pull_loop(idle_projector, runner, gather_s=30.0)
    await loop.start()
    await idle_projector.create_session("st1")
    await eventually(lambda: loop._handling, timeout=10)
    started = time.monotonic()
    await loop.stop(10)
    assert time.monotonic() - started < 5.0
    assert runner.batches == [["tavern.session.st1.session.created"]]

    async def acked() -> bool:
        return await ack_pending(idle_projector) == 0

    await eventually(acked, timeout=10)


async def test_a_deleted_durable_is_made_again_and_read_on(idle_projector: Projector) -> None:
    """Pulls on a consumer that is gone are refused: the loop binds again, creating the durable
    as provisioning would, and reads from there (the runner's checkpoints skip what it had)."""
    runner = Recording()
    loop = pull_loop(idle_projector, runner)
    await loop.start()
    try:
        await idle_projector.create_session("d1")
        await eventually(lambda: sum(len(b) for b in runner.batches) >= 1, timeout=10)
        name = catalog.consumer_name("sessions")
        await idle_projector.bus.js.delete_consumer(SESSIONS.name, name)
        await idle_projector.create_session("d2")
        created = "tavern.session.d2.session.created"
        await eventually(lambda: any(created in b for b in runner.batches), timeout=20)
        info = await idle_projector.bus.js.consumer_info(SESSIONS.name, name)
        assert info.config.durable_name == name
    finally:
        await loop.stop(3)


async def test_many_sessions_widen_the_window_and_one_session_narrows_it(
    idle_projector: Projector,
) -> None:
    """A backlog of three sessions' turns marks the stream busy: the next batch gathers for the
    long window, and takes two sessions' turns published 0.2 s apart; that batch of two
    sessions brings the short window back."""
    for n in range(3):
        await idle_projector.create_session(f"w{n}")
        await scripted_turn(idle_projector, f"w{n}", 1, "Hi", "Hi")  # 21 messages in all
    runner = Recording()
    loop = pull_loop(idle_projector, runner, gather_s=0.01, busy_gather_s=1.0)
    assert loop.window == 0.01
    await loop.start()
    try:
        await eventually(lambda: sum(len(b) for b in runner.batches) >= 21, timeout=10)
        await eventually(lambda: loop.window == 1.0, timeout=5)
        assert len({s.split(".")[2] for s in runner.batches[0]}) == 3
        await idle_projector.create_session("x1")
        await asyncio.sleep(0.2)
        await idle_projector.create_session("x2")
        await eventually(lambda: sum(len(b) for b in runner.batches) >= 23, timeout=10)
        assert runner.batches[-1] == [
            "tavern.session.x1.session.created",
            "tavern.session.x2.session.created",
        ]
        await eventually(lambda: loop.window == 0.01, timeout=5)
    finally:
        await loop.stop(3)


# --- one batch or many: the same read models ------------------------------------------------


async def stored(projector: Projector, name: str) -> list[Entry]:
    projection = catalog.build(name, options_of(projector.settings))
    found: list[Entry] = []
    reading = stream_batches(projector.bus.js, projection.stream, projection.filters, Start(1))
    async with contextlib.aclosing(reading) as batches:
        async for batch in batches:
            found += batch
    return found


async def project(projector: Projector, entries: dict[str, list[Entry]], size: int) -> None:
    """Apply every projection's entries in batches of `size`, from nothing, with fresh
    projections (no cached chats)."""
    options = options_of(projector.settings)
    async with projector.pool.acquire() as conn:
        for table in ("sessions", "history", "chats"):
            await conn.execute(f"DELETE FROM projector.{table}")
        await conn.execute("DELETE FROM projector.checkpoints")
    ChatFiles(projector.chats).clear()
    for name, todo in entries.items():
        runner = LiveRunner(
            catalog.build(name, options),
            catalog.consumer_name(name),
            lambda: projector.pool,
            lambda: projector.bus.js,
            options.live,
        )
        for start in range(0, len(todo), size):
            await runner.apply(todo[start : start + size], check_gaps=False)


async def test_one_batch_leaves_what_event_by_event_application_leaves(
    projector: Projector,
) -> None:
    p = projector
    for sid in ("e1", "e2"):
        await p.create_session(sid)
    for turn in (1, 2):  # the sessions' turns interleave in the stream
        for sid in ("e1", "e2"):
            await scripted_turn(p, sid, turn, f"{sid} says {turn}", f"reply {turn} to {sid}")
    await p.caught_up()
    live, live_files = await tables(p), files(p.chats)
    await p.halt()  # from here on only this test writes the read models
    entries = {name: await stored(p, name) for name in ("sessions", "history", "chat")}
    assert len(entries["sessions"]) == 2 + 2 * 2 * 4

    await project(p, entries, size=1)
    one_by_one, one_by_one_files = await tables(p), files(p.chats)
    assert [r["turns"] for r in one_by_one["sessions"]] == [2, 2]
    assert len(one_by_one["history"]) == 8
    assert len(one_by_one_files) == 2
    assert (one_by_one, one_by_one_files) == (live, live_files)  # as the live batches left them

    for size in (3, 1000):
        await project(p, entries, size=size)
        assert await tables(p) == one_by_one, size
        assert files(p.chats) == one_by_one_files, size


async def test_an_event_that_changes_only_the_row_leaves_the_file_unwritten(
    projector: Projector,
) -> None:
    p = projector
    await p.create_session("r1")
    now = datetime.now(UTC)
    common: dict[str, Any] = {"session_id": "r1", "ts": now, "turn": 1, "step": 1}
    said = UserMessage(id=new_id(), source="user", payload=UserMessagePayload(text="Hi"), **common)
    await p.append("r1", said)
    await p.caught_up("chat")
    row = await p.chat_row("r1")
    assert row["message_count"] == 1
    path = p.chat_file(row["chat_key"])
    before = path.stat()

    payload = AgentRequestPayload(provider="p", model="m", message_count=1, token_estimate=1)
    await p.append("r1", AgentRequest(id=new_id(), payload=payload, **common))
    await p.caught_up("chat")
    after, requested = path.stat(), await p.chat_row("r1")
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert row["gen_started"] is None
    assert requested["gen_started"] is not None  # the row took the event
    assert requested["revision"] == row["revision"]

    reply = AssistantMessagePayload(content="Hello.", provider="offline", model="m")
    await p.append("r1", AssistantMessage(id=new_id(), payload=reply, **common))
    await p.caught_up("chat")
    replied, answered = path.stat(), await p.chat_row("r1")
    assert replied.st_ino != after.st_ino  # rewritten (a new file renamed into place)
    assert answered["gen_started"] is None
    assert answered["message_count"] == 2
    assert answered["revision"] == file_revision(path.read_bytes())
