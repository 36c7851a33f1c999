"""At start: a projection whose stored version is not the code's is rebuilt before the
service consumes again (it asks NATS only when some projection is outdated)."""

from __future__ import annotations

from typing import Any

from tavern_projector import catalog
from tavern_projector.config import ProjectorSettings
from tavern_projector.framework import checkpoints
from tavern_projector.rebuild import rebuild_outdated
from tavern_runtime.bus import connected
from tavern_runtime.logs import get_logger

log = get_logger(__name__)


def _stay(*_: Any) -> None:
    log.warning("rebuild_connection_lost")


async def rebuild_if_outdated(
    settings: ProjectorSettings, pool: Any, options: catalog.Options
) -> None:
    stored = await checkpoints(pool)
    projections = [catalog.build(name, options, rebuilding=True) for name in catalog.NAMES]
    outdated = [
        (p, options.live)
        for p in projections
        if p.name in stored and stored[p.name].version != p.version
    ]
    if not outdated:
        return
    async with connected(settings, "projector-rebuild", on_lost=_stay) as conn:
        await rebuild_outdated(pool, conn.js, outdated)
