"""The CLI as a new user meets it, run as the `tavern` command against real servers: every
failure is one clear line and a non-zero exit, never a traceback, and nothing falls back to a
server nobody named."""

from __future__ import annotations

import asyncio
import io
import os
import sys
from pathlib import Path

import pytest

from tavern_cli import demo, initialise
from tavern_cli.conversation import Conversation, Renderer
from tests.integration.loop.conftest import LoopBus

pytestmark = pytest.mark.integration

TAVERN = str(Path(sys.executable).parent / "tavern")


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env["TAVERN_AUTH_KEY"] = os.environ["TAVERN_AUTH_KEY"]  # the run's (tests/conftest.py)
    return {**env, "TAVERN_DATA_DIR": str(data_dir), **extra}


async def tavern(
    data_dir: Path, *argv: str, stdin: bytes = b"", **env: str
) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        TAVERN,
        *argv,
        env=_env(data_dir, **env),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def one_clear_line(code: int, out: str, err: str, *phrases: str) -> str:
    """A failed command: non-zero, one line on stderr naming the problem, no traceback."""
    assert code != 0, (out, err)
    assert "Traceback" not in out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "argv",
    [
        ("chat",),
        ("status",),
        ("sessions",),
        ("chat", "--session", "demo"),
        ("replay", "assets"),
        ("session", "new"),
    ],
)
async def test_with_nothing_running_a_command_says_so_and_how_to_point_at_a_server(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    code, out, err = await tavern(tmp_path / "data", *argv)
    line = one_clear_line(code, out, err, "nothing is running on", "./tavern up", "--")
    assert "127.0.0.1:4222" not in out + err  # never the default port of someone else's NATS
    assert "tavern init" not in line


async def test_card_import_of_a_folder_says_it_takes_a_file(tmp_path: Path) -> None:
    (tmp_path / "cards").mkdir()
    code, out, err = await tavern(tmp_path / "data", "card", "import", str(tmp_path / "cards"))
    one_clear_line(code, out, err, "is a folder", "tavern st import")


async def test_ledger_import_of_a_missing_or_binary_file_fails_before_connecting(
    tmp_path: Path,
) -> None:
    code, out, err = await tavern(tmp_path / "data", "ledger", "import", str(tmp_path / "nope"))
    one_clear_line(code, out, err, "cannot import", "no such file")
    binary = tmp_path / "photo.jpg"
    binary.write_bytes(bytes(range(256)) * 8)
    code, out, err = await tavern(tmp_path / "data", "ledger", "import", str(binary))
    one_clear_line(code, out, err, "not UTF-8 text", "JSON lines")


async def test_chat_with_an_unknown_session_refuses_and_names_the_new_flag(
    bus: LoopBus, tmp_path: Path
) -> None:
    await bus.engine()
    code, out, err = await tavern(
        tmp_path, "chat", "--session", "does-not-exist", "--nats-url", bus.url
    )
    one_clear_line(code, out, err, "no session does-not-exist", "--new")
    info = await bus.js.stream_info("SESSIONS", subjects_filter="tavern.session.does-not-exist.>")
    assert not info.state.subjects  # nothing was created


async def test_chat_new_starts_the_session_shows_a_prompt_and_no_doubled_lines(
    bus: LoopBus, tmp_path: Path
) -> None:
    await bus.engine()
    process = await asyncio.create_subprocess_exec(
        TAVERN,
        *("chat", "--session", "s-typed", "--new", "--nats-url", bus.url),
        env=_env(tmp_path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(b"Hello, I am Ada\n")
    await process.stdin.drain()
    await bus.turns_ended("s-typed", 1, timeout=30)
    seen = b""
    while b"assistant" not in seen or not seen.rstrip().endswith(b"you>"):
        seen += await asyncio.wait_for(process.stdout.read(256), 20)
    process.stdin.write(b"/quit\n")
    await process.stdin.drain()
    rest, errors = await asyncio.wait_for(process.communicate(), 20)
    text = (seen + rest).decode()
    assert process.returncode == 0, errors
    assert text.count("you> ") >= 2  # at the start and again once the turn ended
    assert "you: Hello, I am Ada" not in text  # the terminal showed it as typed: not twice
    assert 'You said: "Hello, I am Ada"' in text  # the stand-in's echo: the reply is shown
    code, out, err = await tavern(
        tmp_path, "chat", "--session", "s-typed", "--new", "--nats-url", bus.url
    )
    one_clear_line(code, out, err, "already exists", "drop --new")
    code, out, err = await tavern(
        tmp_path, "chat", "--session", "s-typed", "--nats-url", bus.url, stdin=b"/quit\n"
    )
    assert code == 0, err


async def test_the_demo_plays_in_one_session_and_a_second_up_reuses_it(bus: LoopBus) -> None:
    await bus.engine()
    assert not await demo.played_before(bus.url)
    result = await demo.play(bus.url, out=io.StringIO(), colour=False, session_id=demo.DEMO_SESSION)
    assert result.session_id == demo.DEMO_SESSION
    assert await demo.played_before(bus.url)
    chat = Conversation(bus.nc, "demo-other", Renderer())
    assert not await chat.exists()


async def test_replay_of_an_unknown_session_fails_and_an_empty_stream_has_nothing_to_replay(
    bus: LoopBus, database_url: str, tmp_path: Path
) -> None:
    await initialise.migrate_all(database_url)
    servers = ("--nats-url", bus.url, "--database-url", database_url)
    code, out, err = await tavern(
        tmp_path, "replay", "history", "--session", "does-not-exist", *servers
    )
    one_clear_line(code, out, err, "no session does-not-exist")
    code, out, err = await tavern(tmp_path, "replay", "assets", *servers)
    assert code == 0, err
    assert "nothing to replay" in out
    assert "0/1" not in out
