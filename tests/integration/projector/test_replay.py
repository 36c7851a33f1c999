"""Exactly once, byte-for-byte rebuilds, and repair after a failed projection."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from tavern_events.streams import SESSIONS
from tavern_projector import catalog, operations, sources
from tavern_projector.core import options_of
from tavern_projector.framework import Target
from tavern_runtime.provision import provision
from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import converse, files, scripted_turn, tables

pytestmark = pytest.mark.integration

SESSION_PROJECTIONS = ("archive", "chat", "history", "sessions")


def _ignore(_: int) -> None:
    return None


async def test_the_same_events_delivered_twice_change_nothing(projector: Projector) -> None:
    await converse(projector)
    before_files, before = files(projector.chats), await tables(projector)
    assert before_files.keys() == {"v2_mira/s1.jsonl", "v2_mira/s2.jsonl"}

    # Every SESSIONS consumer starts over: the whole stream is delivered a second time.
    for spec in catalog.CONSUMERS:
        if spec.stream == SESSIONS.name:
            await projector.bus.js.delete_consumer(spec.stream, spec.name)
    await provision(projector.bus.js, stream_specs=[], consumers=catalog.CONSUMERS, buckets=())
    await projector.caught_up(*SESSION_PROJECTIONS)
    assert files(projector.chats) == before_files
    assert await tables(projector) == before

    # And applied again without the checkpoint's help: idempotent by key.
    options = options_of(projector.settings)
    entries = [
        e
        async for batch in sources.stream_batches(
            projector.bus.js, SESSIONS.name, ["tavern.session.>"]
        )
        for e in batch
    ]
    for name in SESSION_PROJECTIONS:
        projection = catalog.build(name, options)
        mine = [
            e
            for e in entries
            if any(sources.subject_matches(f, e.subject) for f in projection.filters)
        ]
        async with projector.pool.acquire() as conn, conn.transaction():
            await projection.apply(conn, mine, options.live)
            await projection.finish(conn, options.live)
    assert files(projector.chats) == before_files
    assert await tables(projector) == before


async def test_deleting_the_files_and_replaying_reproduces_them_byte_for_byte(
    projector: Projector,
) -> None:
    await converse(projector)
    before_files, before = files(projector.chats), await tables(projector)
    options = options_of(projector.settings)
    for from_archive in (False, True):
        shutil.rmtree(projector.chats)
        chosen = operations.plan("chat", from_archive=from_archive)
        report = await operations.replay(projector.pool, projector.bus.js, options, chosen, _ignore)
        assert report.entries > 0
        assert files(projector.chats) == before_files, f"from archive: {from_archive}"
        assert await tables(projector) == before
    assert not Target(projector.chats).as_shadow().chats_dir.exists()

    (projector.chats / "v2_mira" / "s2.jsonl").unlink()
    chosen = operations.plan("chat", session_id="s2")
    await operations.replay(projector.pool, projector.bus.js, options, chosen, _ignore)
    assert files(projector.chats) == before_files

    for name in ("history", "sessions"):
        await operations.replay(
            projector.pool, projector.bus.js, options, operations.plan(name), _ignore
        )
    assert await tables(projector) == before

    first_of_fork = (await projector.bus.log("s2"))[0]
    since = operations.plan("history", since=first_of_fork.ts)
    report = await operations.replay(projector.pool, projector.bus.js, options, since, _ignore)
    assert report.sessions == ["s2"]
    from_seq = operations.plan("chat", from_seq=1)
    report = await operations.replay(projector.pool, projector.bus.js, options, from_seq, _ignore)
    assert sorted(report.sessions) == ["s1", "s2"]
    assert files(projector.chats) == before_files
    assert await tables(projector) == before


async def test_a_failed_chat_is_marked_and_repair_rebuilds_it(projector: Projector) -> None:
    character = await _character(projector)
    blocker = projector.chat_file("v2_mira/s1")
    blocker.mkdir(parents=True)  # the atomic rename onto a directory fails
    await projector.create_session("s1", character_id=character)
    await projector.bus.engine()
    await projector.bus.say("s1", "First words.")
    await projector.bus.turns_ended("s1", 1)
    await projector.caught_up()
    row = await projector.chat_row("s1")
    assert row["status"] == "needs_repair"
    assert "IsADirectoryError" in row["error"]

    await projector.bus.say("s1", "The session goes on regardless.")
    await projector.bus.turns_ended("s1", 2)
    await projector.caught_up()
    listed = await projector.rpc("sessions.list", {})
    assert [(s["session_id"], s["needs_repair"], s["turns"]) for s in listed["sessions"]] == [
        ("s1", True, 2)
    ]

    blocker.rmdir()
    options = options_of(projector.settings)
    assert [r["session_id"] for r in await operations.needing_repair(projector.pool)] == ["s1"]
    await operations.repair(projector.pool, projector.bus.js, options, ["s1"], _ignore)
    assert await operations.needing_repair(projector.pool) == []
    repaired = blocker.read_bytes()
    assert repaired.count(b"\n") == 1 + 4

    await projector.bus.say("s1", "And the live projection resumes.")
    await projector.bus.turns_ended("s1", 3)
    await projector.caught_up()
    assert blocker.read_bytes().startswith(repaired)
    assert blocker.read_bytes().count(b"\n") == 1 + 6


async def _character(projector: Projector) -> str:
    from tests.integration.projector.scenes import import_fixture

    found = await import_fixture(projector, "v2_mira.png")
    await projector.caught_up("assets")
    return found


def _rows(found: dict[str, Any]) -> Any:
    return found


async def test_a_projection_of_another_version_rebuilds_itself_at_start(
    projector: Projector,
) -> None:
    await projector.create_session("s1")
    await scripted_turn(projector, "s1", 1, "one", "two")
    await projector.caught_up()
    before = files(projector.chats)
    await projector.halt()
    shutil.rmtree(projector.chats)
    async with projector.pool.acquire() as conn:
        await conn.execute("UPDATE projector.checkpoints SET version = 0 WHERE name = 'chat'")
    await projector.start()
    assert files(projector.chats) == before, "rebuilt before consuming again"
    status = await projector.rpc("status", {})
    chat = next(p for p in status["projections"] if p["projection"] == "chat")
    assert (
        chat["stored_version"]
        == chat["version"]
        == catalog.build("chat", options_of(projector.settings)).version
    )
    assert chat["pending"] == 0
