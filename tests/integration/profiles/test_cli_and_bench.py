"""`tavern session new`, `tavern fork` against a running loop; the modes comparison bench."""

from __future__ import annotations

import asyncio

import pytest

from bench.modes_comparison import compare
from tavern_cli.main import main
from tests.integration.loop.checks import one
from tests.integration.loop.conftest import LoopBus

pytestmark = pytest.mark.integration


async def tavern(*argv: str) -> int:
    """Run the `tavern` command in a thread (it runs its own event loop); its exit code."""

    def run() -> int:
        try:
            main(list(argv))
        except SystemExit as exit_:
            return int(exit_.code or 0)
        return 0

    return await asyncio.to_thread(run)


async def test_session_new_and_fork_bind_sessions(
    bus: LoopBus, capsys: pytest.CaptureFixture[str]
) -> None:
    await bus.engine()
    server = ("--nats-url", bus.url, "--wait", "20")
    assert await tavern("session", "new", "--session", "cli1", "--architecture", "st", *server) == 0
    assert "session cli1: created" in capsys.readouterr().out
    created = (await bus.log("cli1"))[0].payload
    assert (created.architecture, created.context_mode) == ("st", None)

    await bus.say("cli1", "hello")
    await bus.turns_ended("cli1", 2)
    code = await tavern(
        "fork", "cli1", "--into", "cli1-at", "--architecture", "agent-tavern", *server
    )
    assert code == 0
    assert "cli1 -> cli1-at: forked cli1-at" in capsys.readouterr().out
    child = (await bus.log("cli1-at"))[0].payload
    assert (child.architecture, child.context_mode, child.parent_session_id) == (
        "agent-tavern",
        "dsh-native",
        "cli1",
    )
    assert one(await bus.log("cli1"), "session/forked").payload.child_session_id == "cli1-at"

    refused = await tavern("session", "new", "--session", "cli1", *server)
    assert refused == 1
    assert "refused: the session already exists (st)" in capsys.readouterr().err


async def test_the_modes_comparison_reports_both_modes() -> None:
    native, managed = await compare(window=3000, turns=8)
    assert (native.mode, managed.mode) == ("dsh-native", "agent-managed")
    assert native.requests == managed.requests > 8
    assert native.tool_calls == managed.tool_calls == 1
    assert (native.projections, managed.projections) == (0, managed.requests)
    assert native.kernel_stable
    assert managed.kernel_stable
