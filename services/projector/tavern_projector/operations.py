"""Operator actions behind `tavern replay` and `tavern repair`: safe while the system runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nats.js import JetStreamContext

from tavern_projector import catalog, rebuild
from tavern_projector.framework import Projection
from tavern_projector.rebuild import Progress, Reader, Report
from tavern_projector.sources import Start
from tavern_runtime.errors import ConfigurationError

REPAIRED = ("chat", "history", "sessions")
"""What `tavern repair` rebuilds for a session: its chat file and what searches read."""


@dataclass(frozen=True)
class ReplayPlan:
    projection: str
    session_ids: tuple[str, ...] = ()
    start: Start = field(default_factory=Start)
    from_archive: bool = False

    @property
    def scoped(self) -> bool:
        return bool(self.session_ids) or self.start != Start()


def plan(
    projection: str,
    *,
    session_id: str | None = None,
    from_seq: int | None = None,
    since: datetime | None = None,
    from_archive: bool = False,
) -> ReplayPlan:
    """Check a replay request before anything runs (a clear error for a bad combination)."""
    if projection not in catalog.NAMES:
        raise ConfigurationError(
            f"unknown projection {projection!r}; known: {', '.join(catalog.NAMES)}"
        )
    if from_seq is not None and since is not None:
        raise ConfigurationError("give --from-seq or --since, not both")
    if from_archive and projection in ("memory", "assets"):
        raise ConfigurationError(f"{projection} reads its own stream; the archive holds sessions")
    if projection == "archive" and from_archive:
        raise ConfigurationError("the archive is rebuilt from the SESSIONS stream")
    sessions = (session_id,) if session_id else ()
    return ReplayPlan(projection, sessions, Start(from_seq, since), from_archive)


async def affected_sessions(
    pool: Any, js: JetStreamContext | None, projection: Projection, chosen: ReplayPlan
) -> list[str]:
    """The sessions a scoped replay rebuilds: the one asked for, or those with later entries."""
    if chosen.session_ids:
        return list(chosen.session_ids)
    reader = Reader(js, pool, "archive" if chosen.from_archive else "stream", push=True)
    return await rebuild.sessions_since(reader, projection, chosen.start)


async def total(
    pool: Any,
    js: JetStreamContext | None,
    projection: Projection,
    chosen: ReplayPlan,
    sessions: Sequence[str],
) -> int:
    """How many entries the replay will read (for the progress bar)."""
    reader = Reader(js, pool, "archive" if chosen.from_archive else "stream", push=True)
    if not sessions:
        return await reader.total(projection)
    return sum([await reader.total(projection, Start(), sid) for sid in sessions])


async def replay(
    pool: Any,
    js: JetStreamContext | None,
    options: catalog.Options,
    chosen: ReplayPlan,
    progress: Progress,
    sessions: Sequence[str] | None = None,
) -> Report:
    """Rebuild a projection (all of it, or the sessions `chosen` names or implies)."""
    projection = catalog.build(chosen.projection, options, rebuilding=True)
    reader = Reader(js, pool, "archive" if chosen.from_archive else "stream", push=True)
    if not chosen.scoped:
        return await rebuild.rebuild_all(pool, reader, projection, options.live, progress)
    if not projection.by_session:
        return await rebuild.rebuild_all(pool, reader, projection, options.live, progress)
    found = (
        list(sessions)
        if sessions is not None
        else await affected_sessions(pool, js, projection, chosen)
    )
    return await rebuild.rebuild_sessions(pool, reader, projection, options.live, found, progress)


async def needing_repair(pool: Any) -> list[dict[str, Any]]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT session_id, chat_key, error, failed_seq, updated_at FROM projector.chats
               WHERE status <> 'ok' ORDER BY updated_at"""
        )
    return [dict(r) for r in rows]


async def repair(
    pool: Any,
    js: JetStreamContext | None,
    options: catalog.Options,
    session_ids: Sequence[str],
    progress: Progress,
    *,
    from_archive: bool = False,
) -> list[Report]:
    """Rebuild the chat (and history and session row) of each session from its log."""
    reader = Reader(js, pool, "archive" if from_archive else "stream", push=True)
    reports = []
    for name in REPAIRED:
        projection = catalog.build(name, options, rebuilding=True)
        reports.append(
            await rebuild.rebuild_sessions(
                pool, reader, projection, options.live, session_ids, progress
            )
        )
    return reports
