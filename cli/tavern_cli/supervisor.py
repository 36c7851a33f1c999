"""Service processes of `tavern up`: started, their output prefixed, restarted after a crash
with backoff, and stopped with SIGTERM, a grace period, then SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tavern_cli.catalog import ServiceEntry
from tavern_cli.rundir import pid_alive

FIRST_DELAY_S = 1.0
MAX_DELAY_S = 30.0
KILL_WAIT_S = 5.0
LINE_LIMIT = 1 << 20
STABLE_AFTER_S = 30.0  # a process that ran this long before crashing restarts without delay growth


def next_delay(previous: float, ran_for_s: float) -> float:
    """Backoff before the next restart: doubles on quick crashes, resets after a stable run."""
    if ran_for_s >= STABLE_AFTER_S or previous <= 0:
        return FIRST_DELAY_S
    return min(previous * 2, MAX_DELAY_S)


def prefix(name: str, colour: str, width: int, tty: bool) -> str:
    """`[loop]     ` padded to `width`, in colour on a terminal."""
    tag = f"[{name}]"
    padding = " " * max(0, width + 2 - len(tag))
    return f"\x1b[{colour}m{tag}\x1b[0m{padding} " if tty else f"{tag}{padding} "


@dataclass
class Printer:
    """Writes prefixed lines for services and for `tavern up` itself.

    When the reader goes away (`tavern up | tee log` and Ctrl-C kills `tee` first), output is
    dropped from then on: a failed write never stops `tavern up` from stopping everything."""

    out: TextIO = field(default_factory=lambda: sys.stdout)
    width: int = 12
    closed: bool = False

    @property
    def tty(self) -> bool:
        return not self.closed and self.out.isatty()

    def line(self, name: str, colour: str, text: str) -> None:
        if self.closed:
            return
        try:
            self.out.write(prefix(name, colour, self.width, self.tty) + text + "\n")
            self.out.flush()
        except (BrokenPipeError, ValueError, OSError):
            self.closed = True
            silence_broken_output(self.out)

    def say(self, text: str) -> None:
        self.line("tavern", "1", text)


def silence_broken_output(out: TextIO) -> None:
    """Point the file descriptor of a reader-less pipe (and stderr, when it is the same pipe)
    at /dev/null, so later prints and the interpreter's final flush do not fail again."""
    with contextlib.suppress(OSError, ValueError):
        fd = out.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        same = [fd]
        with contextlib.suppress(OSError):
            if os.path.sameopenfile(fd, 2):
                same.append(2)
        for target in same:
            os.dup2(devnull, target)
        os.close(devnull)


# --- the services of a `tavern up` that died without stopping them (kill -9) --------------------


def pid_file(run_dir: Path, name: str) -> Path:
    return run_dir / f"{name}.service.json"


def record_child(run_dir: Path, name: str, pid: int) -> None:
    pid_file(run_dir, name).write_text(json.dumps({"pid": pid, "service": name}))


def forget_child(run_dir: Path, name: str, pid: int) -> None:
    path = pid_file(run_dir, name)
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("pid") == pid:
            path.unlink()


def orphans(run_dir: Path, entries: Sequence[ServiceEntry]) -> dict[str, int]:
    """name -> pid of each service process a previous `tavern up` on this data dir left
    running: its pid file names a live process whose command line is that service's."""
    found: dict[str, int] = {}
    for entry in entries:
        try:
            pid = int(json.loads(pid_file(run_dir, entry.name).read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if pid_alive(pid) and _runs(pid, entry):
            found[entry.name] = pid
    return found


def _runs(pid: int, entry: ServiceEntry) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return entry.package.encode() in argv


def stop_orphans(
    run_dir: Path, entries: Sequence[ServiceEntry], grace_s: float, say: Callable[[str], None]
) -> list[int]:
    """SIGTERM each orphaned service's process group, SIGKILL what is left after `grace_s`."""
    found = orphans(run_dir, entries)
    for name, pid in found.items():
        say(f"stopping {name} (pid {pid}), left running by a `tavern up` that died")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(pid_alive(pid) for pid in found.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in found.values():
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
    for name, pid in found.items():
        forget_child(run_dir, name, pid)
    return list(found.values())


@dataclass
class Child:
    entry: ServiceEntry
    process: asyncio.subprocess.Process | None = None
    started_at: float = 0.0
    restarts: int = 0


class Supervisor:
    """Keeps one process per service running until `stop()`."""

    def __init__(
        self,
        entries: Sequence[ServiceEntry],
        env: Mapping[str, str],
        printer: Printer,
        grace_s: float,
        own_env: Mapping[str, Mapping[str, str]] | None = None,
        run_dir: Path | None = None,
    ) -> None:
        self.children = [Child(e) for e in entries]
        self.env = dict(env)
        self.own_env = {name: dict(values) for name, values in (own_env or {}).items()}
        """Per service: what only that process gets (its own credentials), over `env`."""
        self.printer = printer
        self.run_dir = run_dir
        """Where each child's pid is noted while it runs (a later `tavern up` stops orphans)."""
        self.grace_s = grace_s
        self.stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._keep_running(c)) for c in self.children]

    def pids(self) -> list[int]:
        return [c.process.pid for c in self._alive() if c.process]

    async def stop(self) -> None:
        """SIGTERM to every service, up to `grace_s` to exit, then SIGKILL."""
        self.stopping.set()
        for child in self._alive():
            self._signal(child, signal.SIGTERM)
        if not await self._tasks_done(self.grace_s):
            self.kill_all()
            await self._tasks_done(KILL_WAIT_S)

    async def _tasks_done(self, timeout_s: float) -> bool:
        if not self._tasks:
            return True
        _, pending = await asyncio.wait(self._tasks, timeout=timeout_s)
        return not pending

    def _alive(self) -> list[Child]:
        return [c for c in self.children if c.process and c.process.returncode is None]

    def kill_all(self) -> None:
        for child in self._alive():
            self.printer.line(child.entry.name, child.entry.colour, "killed (grace period over)")
            self._signal(child, signal.SIGKILL)

    def _signal(self, child: Child, signum: signal.Signals) -> None:
        if child.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            # Each service leads its own process group: the signal reaches anything it spawned.
            os.killpg(child.process.pid, signum)

    async def _keep_running(self, child: Child) -> None:
        delay = 0.0
        while not self.stopping.is_set():
            code = await self._run_once(child)
            if self.stopping.is_set():
                self._report_exit(child, code)
                return
            delay = next_delay(delay, time.monotonic() - child.started_at)
            child.restarts += 1
            self.printer.line(
                child.entry.name,
                child.entry.colour,
                f"exited with code {code}; restarting in {delay:.0f}s (restart {child.restarts})",
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), delay)

    async def _run_once(self, child: Child) -> int:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *child.entry.command,
            env={**self.env, **self.own_env.get(child.entry.name, {})},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            # A process group of its own (Ctrl-C reaches `tavern up` only; it stops services in
            # order), in `tavern up`'s session: one scheduling group (`yield_cpu`).
            process_group=0,
            limit=LINE_LIMIT,
        )
        child.process, child.started_at = process, time.monotonic()
        if self.run_dir is not None:
            record_child(self.run_dir, child.entry.name, process.pid)
        if self.stopping.is_set():  # stop() began while this one was being spawned
            self._signal(child, signal.SIGTERM)
        assert process.stdout is not None
        await self._pump(child, process.stdout)
        code = await process.wait()
        if self.run_dir is not None:
            forget_child(self.run_dir, child.entry.name, process.pid)
        return code

    async def _pump(self, child: Child, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # a line over LINE_LIMIT: show what is buffered, go on
                line = await stream.read(LINE_LIMIT)
            if not line:
                return
            text = line.decode(errors="replace").rstrip("\r\n")
            self.printer.line(child.entry.name, child.entry.colour, text)

    def _report_exit(self, child: Child, code: int) -> None:
        how = "stopped" if code == 0 else f"stopped with code {code}"
        self.printer.line(child.entry.name, child.entry.colour, how)
