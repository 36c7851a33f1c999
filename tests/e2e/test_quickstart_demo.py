"""The Quickstart's first command as a new user meets it: `tavern up` plays the demo
conversation through the four service processes, then Ctrl-C stops everything."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from tavern_cli.demo import SCRIPT
from tests.support import eventually

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


async def _demo_is_visible(url: str, session_id: str) -> None:
    async with httpx.AsyncClient(base_url=url, follow_redirects=True, timeout=30) as http:
        first = await http.get("/")
        assert first.url.path == "/setup"  # a fresh install: the first visit creates the owner
        headers = {"X-CSRF-Token": http.cookies["tavern_csrf"]}
        owner = {"name": "ada", "password": "a-long-enough-password"}
        assert (await http.post("/api/setup", json=owner, headers=headers)).status_code == 200

        async def listed() -> bool:
            found = (await http.get("/api/sessions")).json()["sessions"]
            return session_id in [s["session_id"] for s in found]

        await eventually(listed, timeout=30, interval=0.5)  # the projector's read model
        async with http.stream("GET", f"/api/sessions/{session_id}/events") as events:
            async for line in events.aiter_lines():
                if "Nautilus" in line:
                    return
        raise AssertionError("the demo's conversation did not stream")


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
        # It ends with the web app's URL; the demo conversation is there, under the owner.
        opened = await _read_until(up.stdout, " : the demo conversation is there", timeout=30)
        url = re.search(r"open (http://\S+)", opened)
        assert url, opened
        demo_session = re.search(r"demo session (\S+)", text)
        assert demo_session, text
        await _demo_is_visible(url[1], demo_session[1])
        up.send_signal(signal.SIGINT)
        rest = await asyncio.wait_for(up.stdout.read(), 60)
        assert await up.wait() == 0
        assert "stopping nats-server" in rest.decode(errors="replace")
    finally:
        if up.returncode is None:
            up.kill()
            await up.wait()
        shutil.rmtree(data_dir, ignore_errors=True)
