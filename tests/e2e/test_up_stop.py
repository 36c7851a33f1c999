"""Stopping `tavern up` the ways people do: Ctrl-C while its output goes through a pipe whose
reader died first (`tavern up | tee up.log`), and `kill -9`, after which the next `tavern up`
finds the services the dead one left running and stops them before it starts its own."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tavern_cli.rundir import pid_alive
from tests.e2e.test_up import OWNED, TAVERN, _all_gone, _env, _green, _pids, tavern_up
from tests.e2e.test_up import data_dir as data_dir
from tests.support import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _as_in_a_terminal() -> None:
    """Ctrl-C's default action in the child, as a terminal's foreground job has it: a runner
    started as a background job ignores SIGINT, and its children would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def test_ctrl_c_through_a_dead_pipe_still_stops_everything(
    data_dir: Path,
    tmp_path: Path,
) -> None:
    log = tmp_path / "up.log"
    read_end, write_end = os.pipe()
    up = await asyncio.create_subprocess_exec(
        TAVERN,
        "up",
        "--no-demo",
        env=_env(data_dir),
        stdout=write_end,
        stderr=asyncio.subprocess.STDOUT,
        preexec_fn=_as_in_a_terminal,
    )
    tee = await asyncio.create_subprocess_exec(
        "tee",
        str(log),
        stdin=read_end,
        stdout=asyncio.subprocess.DEVNULL,
        preexec_fn=_as_in_a_terminal,
    )
    os.close(read_end)
    os.close(write_end)
    try:
        await eventually(lambda: _green(data_dir), timeout=60, interval=0.5)
        pids = _pids(data_dir)
        tee.send_signal(signal.SIGINT)  # the terminal's Ctrl-C; tee goes first, the worst case
        await asyncio.wait_for(tee.wait(), 10)
        up.send_signal(signal.SIGINT)  # its "stopping" line now meets EPIPE
        code = await asyncio.wait_for(up.wait(), 60)
        await _all_gone(pids)
        assert code == 0
        assert not (data_dir / "run" / "servers.json").exists()
    except BaseException:
        sys.stderr.write(log.read_text(errors="replace")[-6000:])
        raise
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGTERM)
            await asyncio.wait_for(up.wait(), 60)
        if tee.returncode is None:
            tee.kill()
            await tee.wait()


async def test_after_kill_9_the_next_up_stops_the_orphaned_services(
    data_dir: Path,
    tmp_path: Path,
) -> None:
    log = tmp_path / "up.log"
    try:
        async with tavern_up(data_dir, log) as up:
            await eventually(lambda: _green(data_dir), timeout=60, interval=0.5)
            first = _pids(data_dir)
            up.kill()  # kill -9: no chance to stop anything
            await up.wait()
        orphaned = {name: first[name] for name in OWNED}  # the web app too
        assert all(pid_alive(pid) for pid in orphaned.values())  # they did outlive it

        async with tavern_up(data_dir, log) as up:
            await eventually(lambda: _green(data_dir), timeout=60, interval=0.5)
            await _all_gone(orphaned)
            second = _pids(data_dir)
            assert not set(second.values()) & set(first.values())
            text = log.read_text(errors="replace")
            for name in OWNED:
                assert f"stopping {name} (pid {orphaned[name]}), left running" in text
            up.send_signal(signal.SIGTERM)  # SIGTERM stops it as Ctrl-C does
            assert await asyncio.wait_for(up.wait(), 60) == 0
        await _all_gone(second)
    except BaseException:
        sys.stderr.write(log.read_text(errors="replace")[-6000:])
        raise
