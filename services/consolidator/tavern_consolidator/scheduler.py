"""The background worker: runs scope jobs (`distil`, `rules`) one at a time, off every turn's
path. Intake wakes scopes; a periodic sweep finds failed, capped or half-done ones again (and all
scopes once after a start). A woken scope's job waits `coalesce_s` from its first wake, so the
wakes of one turn (its evidence, its end, from two consumers) run the job once. Stopping cancels
the job in hand after the grace period: an unfinished batch leaves its watermark where it was."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from tavern_runtime.logs import get_logger

log = get_logger(__name__)

Job = Callable[[str], Awaitable[Any]]
Sweep = Callable[[bool], Awaitable[list[str]]]


class Scheduler:
    def __init__(
        self, jobs: Mapping[str, Job], sweep: Sweep, poll_s: float, coalesce_s: float = 0.0
    ) -> None:
        self._jobs, self._sweep, self._poll = jobs, sweep, poll_s
        self._coalesce = coalesce_s
        self._pending: dict[tuple[str, str], float] = {}
        """(job, scope) -> when it is due: its first wake plus `coalesce_s` (a later wake of a
        pending job does not postpone it)."""
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def wake(self, job: str, scopes: Iterable[str]) -> None:
        due = time.monotonic() + self._coalesce
        for scope in scopes:
            self._pending.setdefault((job, scope), due)
        if self._pending:
            self._wake.set()

    def start(self) -> None:
        self._stopping.clear()
        self._task = asyncio.create_task(self._loop(), name="consolidator-scheduler")

    async def stop(self, grace_s: float) -> None:
        self._stopping.set()
        self._wake.set()
        if self._task is None:
            return
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._task), grace_s)
        if not self._task.done():
            log.warning("job_cancelled_on_stop")
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        await self._swept(everything=True)
        while not self._stopping.is_set():
            if not self._pending:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._poll)
                self._wake.clear()
                if not self._pending and not self._stopping.is_set():
                    await self._swept(everything=False)
            await self._drain()

    async def _swept(self, everything: bool) -> None:
        try:
            self.wake("distil", await self._sweep(everything))
        except Exception as exc:  # the store may be away; the next sweep tries again
            log.warning("sweep_failed", error=repr(exc))

    async def _drain(self) -> None:
        while self._pending and not self._stopping.is_set():
            (job, scope), due = next(iter(self._pending.items()))  # the first woken is due first
            wait = due - time.monotonic()
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), wait)
                continue
            del self._pending[(job, scope)]
            await self._run(job, scope)

    async def _run(self, job: str, scope: str) -> None:
        try:
            result = await self._jobs[job](scope)
        except Exception as exc:  # one scope's failure never stops the worker
            log.warning("job_failed", job=job, scope_id=scope, error=repr(exc))
            return
        log.debug("job_done", job=job, scope_id=scope, result=result)
