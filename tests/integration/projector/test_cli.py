"""The projector's commands as an operator runs them (subprocesses against the test servers)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import files, scripted_turn

pytestmark = pytest.mark.integration


async def tavern(projector: Projector, *args: str) -> tuple[int, str]:
    env = {
        **os.environ,
        "TAVERN_NATS_URL": projector.settings.nats_url,
        "TAVERN_DATABASE_URL": projector.settings.database_url,
        "TAVERN_DATA_DIR": str(projector.settings.data_dir),
        "COLUMNS": "200",
    }
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "tavern"),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, " ".join(out.decode().split())


async def test_sessions_replay_and_repair_from_the_command_line(projector: Projector) -> None:
    await projector.create_session("s1")
    await scripted_turn(projector, "s1", 1, "hello", "hi there")
    await projector.caught_up()
    before = files(projector.chats)

    code, out = await tavern(projector, "sessions")
    assert code == 0
    assert "s1" in out
    assert "agent-tavern / dsh-native" in out
    assert "Assistant/s1" in out

    code, out = await tavern(projector, "replay", "chat", "--session", "s1")
    assert (code, files(projector.chats)) == (0, before)
    assert "rebuilt chat: 3 entries, 1 session(s)" in out
    assert "ev/s" in out

    code, out = await tavern(projector, "repair", "--list")
    assert (code, out) == (0, "nothing needs repair")

    code, out = await tavern(projector, "replay", "memory", "--from-archive")
    assert code == 1
    assert "memory reads its own stream" in out


async def test_restore_from_the_command_line(projector: Projector) -> None:
    await projector.create_session("s1")
    await scripted_turn(projector, "s1", 1, "hello", "hi there")
    await projector.caught_up()
    stored = (await projector.bus.js.stream_info("SESSIONS")).state.messages
    code, out = await tavern(projector, "restore")
    assert code == 1
    assert "restore only fills a missing or empty stream" in out

    code, out = await tavern(projector, "restore", "--delete-damaged", "--yes")
    assert code == 0, out
    assert f"restored {stored} events of 1 sessions" in out
    # the running projector may recreate its own consumers before the command does
    assert "created consumer SESSIONS/ledger-bindings" in out
    chat = await projector.bus.js.consumer_info("SESSIONS", "projector-chat")
    assert chat.name == "projector-chat"
    assert (await projector.bus.js.stream_info("SESSIONS")).state.messages == stored
