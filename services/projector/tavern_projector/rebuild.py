"""Rebuilding projections while the system runs: from the stream or from the archive.

A full rebuild fills a shadow (tables `*_shadow`, directory `chats.rebuild`) without holding
any lock, then, holding the projection's lock (live batches wait), reads the tail written
meanwhile, swaps the shadow in and sets the checkpoint. A session rebuild replaces one
session's part inside one transaction. Either way readers see the old model or the new one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from tavern_projector import sources
from tavern_projector.errors import ProjectionBusy
from tavern_projector.framework import (
    LOCK_NAMESPACE,
    Entry,
    Projection,
    Target,
    lock_key,
    lock_projection,
    read_checkpoint,
    write_checkpoint,
)
from tavern_projector.sources import Start
from tavern_runtime.errors import ConfigurationError
from tavern_runtime.logs import get_logger
from tavern_runtime.pg import holds_session_state

log = get_logger(__name__)

Source = Literal["stream", "archive"]
Progress = Callable[[int], None]
"""Called with the number of entries applied since the last call."""


def _ignore(_: int) -> None:
    return None


@dataclass
class Report:
    projection: str
    entries: int = 0
    sessions: list[str] = field(default_factory=list)
    checkpoint: int = 0


@dataclass
class Reader:
    """Reads one projection's entries from the stream or the archive."""

    js: JetStreamContext | None
    pool: Any
    source: Source = "stream"
    push: bool = False
    """Read the stream through ordered push consumers (needs `$JS.FC.<stream>.>` rights)."""

    def batches(
        self, projection: Projection, start: Start = Start(), session_id: str | None = None
    ) -> AsyncIterator[list[Entry]]:
        filters: Sequence[str] = projection.filters
        if session_id is not None:
            filters = sources.narrow(filters, session_id)
        if self.source == "archive":
            self._archive_only(projection)
            return sources.archive_batches(self.pool, filters, start, session_id=session_id)
        return sources.stream_batches(self._js(), projection.stream, filters, start, push=self.push)

    async def total(
        self, projection: Projection, start: Start = Start(), session_id: str | None = None
    ) -> int:
        if self.source == "archive":
            return await sources.archive_count(self.pool, start, session_id)
        filters: Sequence[str] = projection.filters
        if session_id is not None:
            filters = sources.narrow(filters, session_id)
        return await sources.pending(self._js(), projection.stream, filters, start)

    def _js(self) -> JetStreamContext:
        if self.js is None:
            raise ConfigurationError("this replay needs NATS")
        return self.js

    def _archive_only(self, projection: Projection) -> None:
        if not projection.by_session:
            raise ConfigurationError(
                f"the archive holds session events; {projection.name} reads {projection.stream}"
            )


@contextlib.asynccontextmanager
async def exclusive(pool: Any, name: str) -> AsyncIterator[Any]:
    """One rebuild of a projection at a time, across processes (a session advisory lock)."""
    async with pool.acquire() as conn:
        key = lock_key(f"{name}:rebuild")
        holds_session_state(conn)
        if not await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", LOCK_NAMESPACE, key):
            raise ProjectionBusy(f"{name} is being rebuilt by another process")
        try:
            yield conn
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1, $2)", LOCK_NAMESPACE, key)


async def rebuild_all(
    pool: Any,
    reader: Reader,
    projection: Projection,
    live: Target,
    progress: Progress = _ignore,
) -> Report:
    """Rebuild the whole projection into a shadow, then swap it in."""
    shadow, report = live.as_shadow(), Report(projection.name)
    async with exclusive(pool, projection.name) as conn:
        await projection.prepare_shadow(conn, shadow)
        try:
            last = await _fill(conn, reader, projection, shadow, Start(), progress, report)
            async with conn.transaction():
                await lock_projection(conn, projection.name)
                tail = await _tail_reader(reader, projection)
                start = Start(last + 1)
                last = max(
                    last, await _fill(conn, tail, projection, shadow, start, progress, report)
                )
                checkpoint = await read_checkpoint(conn, projection.name)
                report.checkpoint = max(last, _seq_of(checkpoint, projection))
                await projection.finish(conn, shadow)
                await projection.swap(conn, shadow)
                await write_checkpoint(conn, projection.name, projection.version, report.checkpoint)
        except BaseException:
            await projection.drop_shadow(conn, shadow)
            raise
    await projection.after_swap(shadow)
    log.info("projection_rebuilt", projection=projection.name, entries=report.entries)
    return report


async def _tail_reader(reader: Reader, projection: Projection) -> Reader:
    """Entries stored during the fill: from the stream when it exists (the archive may lag)."""
    if reader.js is None or reader.source == "stream":
        return reader
    try:
        await reader.js.stream_info(projection.stream)
    except NotFoundError:
        return reader
    return Reader(reader.js, reader.pool, "stream", reader.push)


def _seq_of(checkpoint: Any, projection: Projection) -> int:
    """A live checkpoint of the same version may be ahead of what the replay read."""
    if checkpoint is None or checkpoint.version != projection.version:
        return 0
    return int(checkpoint.stream_seq)


async def _fill(
    conn: Any,
    reader: Reader,
    projection: Projection,
    target: Target,
    start: Start,
    progress: Progress,
    report: Report,
    session_id: str | None = None,
) -> int:
    last = (start.stream_seq or 1) - 1
    async for batch in reader.batches(projection, start, session_id):
        async with conn.transaction():
            await projection.apply(conn, batch, target)
        last = batch[-1].stream_seq
        report.entries += len(batch)
        progress(len(batch))
    return last


async def rebuild_sessions(
    pool: Any,
    reader: Reader,
    projection: Projection,
    live: Target,
    session_ids: Sequence[str],
    progress: Progress = _ignore,
) -> Report:
    """Replace what these sessions contributed, from their logs (one transaction)."""
    if not projection.by_session:
        raise ConfigurationError(f"{projection.name} is not a per-session projection")
    report = Report(projection.name, sessions=list(session_ids))
    async with pool.acquire() as conn, conn.transaction():
        await lock_projection(conn, projection.name)
        await projection.forget_sessions(conn, live, session_ids)
        for session_id in session_ids:
            await _fill(conn, reader, projection, live, Start(), progress, report, session_id)
        await projection.finish(conn, live)
    await projection.after_commit(live)
    log.info("sessions_rebuilt", projection=projection.name, sessions=len(session_ids))
    return report


async def sessions_since(reader: Reader, projection: Projection, start: Start) -> list[str]:
    """Which sessions have entries of this projection at or after `start` (in first-seen order)."""
    found: dict[str, None] = {}
    if reader.source == "archive":
        batches = sources.archive_batches(reader.pool, projection.filters, start)
    else:
        batches = sources.stream_batches(
            reader._js(), projection.stream, projection.filters, start, headers_only=True
        )
    async for batch in batches:
        for entry in batch:
            found.setdefault(entry.subject.split(".")[2], None)
    return list(found)


async def rebuild_outdated(
    pool: Any, js: JetStreamContext, projections: Sequence[tuple[Projection, Target]]
) -> list[Report]:
    """At start: rebuild every projection whose stored version is not the code's."""
    reports = []
    for projection, live in projections:
        async with pool.acquire() as conn:
            checkpoint = await read_checkpoint(conn, projection.name)
        if checkpoint is None or checkpoint.version == projection.version:
            continue
        log.warning(
            "projection_outdated",
            projection=projection.name,
            stored=checkpoint.version,
            code=projection.version,
        )
        reports.append(await rebuild_all(pool, Reader(js, pool), projection, live))
    return reports
