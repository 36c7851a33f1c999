"""Replays asked over the bus: `replay.start` checks the plan, records a job and rebuilds the
projection in the background with `operations.replay` (what `tavern replay` runs); the job's
row carries its progress, which `replay.status` answers from any replica. Operator only.

A job belongs to the replica that runs it; if that replica stops, the row stays `running`
with a stale `updated_at`, and the status says so (`stalled`), so the operator asks again.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tavern_events.ids import new_id
from tavern_events.rpc.projector import ReplayStartRequest, ReplayStatusRequest
from tavern_projector import catalog, operations
from tavern_projector.errors import BadRequest, NotFound
from tavern_runtime.errors import ConfigurationError, TavernError
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

WRITE_EVERY_S = 0.25
"""Progress reaches the job's row at most this often (and once at the end)."""
STALLED_AFTER = timedelta(seconds=60)


@dataclass
class Progress:
    """Counts applied entries; writes them to the job's row now and then."""

    job_id: str
    done: int = 0
    written_at: float = 0.0

    def advance(self, n: int) -> None:
        self.done += n

    def due(self) -> bool:
        return time.monotonic() - self.written_at >= WRITE_EVERY_S


class Replays:
    def __init__(self, core: Any) -> None:
        self._core = core
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, raw: Any, asked_by: str) -> dict[str, Any]:
        body = _parsed(ReplayStartRequest, raw)
        try:
            plan = operations.plan(
                body.projection, session_id=body.session_id, from_archive=body.from_archive
            )
        except ConfigurationError as exc:
            raise BadRequest(exc.message) from None
        job_id = f"replay-{new_id()}"
        pool = self._core.pool()
        async with pool.acquire() as conn:
            await conn.execute(
                "INSERT INTO projector.replay_jobs (job_id, projection, session_id, from_archive, "
                "state, asked_by) VALUES ($1, $2, $3, $4, 'running', $5)",
                job_id,
                plan.projection,
                body.session_id,
                plan.from_archive,
                asked_by,
            )
        task = asyncio.create_task(self._run(job_id, plan))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        log.info("replay_started", job_id=job_id, projection=plan.projection, by=asked_by)
        return await self.status({"job_id": job_id})

    async def status(self, raw: Any) -> dict[str, Any]:
        body = _parsed(ReplayStatusRequest, raw)
        async with self._core.pool().acquire() as conn:
            row = await conn.fetchrow(
                "SELECT * FROM projector.replay_jobs WHERE job_id = $1", body.job_id
            )
        if row is None:
            raise NotFound(f"no replay job {body.job_id}")
        return _view(dict(row), datetime.now(UTC))

    async def _run(self, job_id: str, plan: operations.ReplayPlan) -> None:
        pool, js = self._core.pool(), self._core.js()
        progress = Progress(job_id)
        try:
            projection = catalog.build(plan.projection, self._core.options)
            sessions = list(plan.session_ids) or []
            total = await operations.total(pool, js, projection, plan, sessions)
            await self._write(job_id, total=total)
            writer = asyncio.create_task(self._keep_writing(progress))
            try:
                report = await operations.replay(
                    pool, js, self._core.options, plan, progress.advance, sessions or None
                )
            finally:
                writer.cancel()
            # entries stored while it ran are read too: the total is what was read
            total = max(total, progress.done)
            await self._write(
                job_id, done=progress.done, total=total, entries=report.entries, state="done"
            )
            log.info("replay_done", job_id=job_id, entries=report.entries)
        except Exception as exc:  # a failed job is reported on its row, never raised away
            message = exc.message if isinstance(exc, TavernError) else type(exc).__name__
            log.warning("replay_failed", job_id=job_id, error=message)
            await self._write(job_id, done=progress.done, state="failed", error=message[:500])

    async def _keep_writing(self, progress: Progress) -> None:
        while True:
            await asyncio.sleep(WRITE_EVERY_S)
            await self._write(progress.job_id, done=progress.done)

    async def _write(self, job_id: str, **fields: Any) -> None:
        names = list(fields)
        sets = ", ".join(f"{name} = ${i}" for i, name in enumerate(names, start=2))
        async with self._core.pool().acquire() as conn:
            await conn.execute(
                f"UPDATE projector.replay_jobs SET {sets}, updated_at = now() WHERE job_id = $1",
                job_id,
                *fields.values(),
            )

    async def stop(self) -> None:
        """Shutdown: the running jobs are cancelled (their rows say `running` until stale)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _parsed(model: type[Any], raw: Any) -> Any:
    try:
        return model.model_validate(raw if isinstance(raw, dict) else {})
    except ValueError as exc:
        raise BadRequest(f"invalid request: {exc}") from None


def _view(row: dict[str, Any], now: datetime) -> dict[str, Any]:
    state = row["state"]
    if state == "running" and now - row["updated_at"] > STALLED_AFTER:
        state = "stalled"
    return {
        "job_id": row["job_id"],
        "projection": row["projection"],
        "session_id": row["session_id"],
        "from_archive": row["from_archive"],
        "state": state,
        "total": row["total"],
        "done": row["done"],
        "entries": row["entries"],
        "failure": row["error"],  # not `error`: a reply with that key reads as a refusal
        "started_at": row["started_at"].isoformat(),
        "updated_at": row["updated_at"].isoformat(),
    }
