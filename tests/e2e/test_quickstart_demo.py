"""The Quickstart's first command as a new user meets it: `tavern up` plays the demo
conversation through the four service processes, then Ctrl-C stops everything."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

from tavern_cli.demo import SCRIPT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TAVERN = str(Path(sys.executable).parent / "tavern")
FINISHED = "--- demo finished:"


async def _read_until(stream: asyncio.StreamReader, marker: str, timeout: float) -> str:
    seen: list[str] = []

    async def read() -> None:
        while line := await stream.readline():
            seen.append(line.decode(errors="replace"))
            if marker in seen[-1]:
                return

    await asyncio.wait_for(read(), timeout)
    return "".join(seen)


async def test_tavern_up_plays_the_demo_conversation_and_stops_on_ctrl_c() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="tavern-demo-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env.update(TAVERN_DATA_DIR=str(data_dir), TAVERN_SHUTDOWN_GRACE_S="5")
    up = await asyncio.create_subprocess_exec(
        TAVERN, "up", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        assert up.stdout is not None
        text = await _read_until(up.stdout, FINISHED, timeout=120)
        outcomes = ", ".join(["completed"] * len(SCRIPT))
        assert f"{FINISHED} {len(SCRIPT)} turns ({outcomes})" in text
        assert "you: Hello! I'm Ada" in text
        assert "assistant:" in text
        assert "context compacted" in text
        up.send_signal(signal.SIGINT)
        rest = await asyncio.wait_for(up.stdout.read(), 60)
        assert await up.wait() == 0
        assert "stopping nats-server" in rest.decode(errors="replace")
    finally:
        if up.returncode is None:
            up.kill()
            await up.wait()
        shutil.rmtree(data_dir, ignore_errors=True)
