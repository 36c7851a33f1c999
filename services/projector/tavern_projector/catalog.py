"""The projections of the service and the durable consumer each one reads through.

Consumer names and filters are contracts: provisioning creates them, replicas share them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import tzinfo

from tavern_events import subjects
from tavern_events.streams import SESSIONS
from tavern_projector.framework import Projection, Target
from tavern_projector.projections.archive import ArchiveProjection
from tavern_projector.projections.assets import AssetsProjection
from tavern_projector.projections.chat import FLUSH_EVERY, ChatProjection, Names
from tavern_projector.projections.history import HistoryProjection
from tavern_projector.projections.memory import MemoryProjection
from tavern_projector.projections.sessions import SessionsProjection
from tavern_runtime.provision import ConsumerSpec

NAMES = ("archive", "chat", "history", "sessions", "memory", "assets")
BACKOFF_S = (30.0, 60.0, 120.0)


def consumer_name(projection: str) -> str:
    return f"projector-{projection}"


@dataclass(frozen=True)
class Options:
    live: Target
    tz: tzinfo
    names: Names = field(default_factory=Names)


def build(name: str, options: Options, *, rebuilding: bool = False) -> Projection:
    """A fresh projection object (a rebuild gets its own, with its own caches)."""
    if name == "archive":
        return ArchiveProjection()
    if name == "chat":
        flush = FLUSH_EVERY if rebuilding else 1
        return ChatProjection(options.tz, options.names, flush_every=flush)
    if name == "history":
        return HistoryProjection()
    if name == "sessions":
        return SessionsProjection()
    if name == "memory":
        return MemoryProjection(options.live, options.tz)
    if name == "assets":
        return AssetsProjection()
    raise KeyError(f"unknown projection {name!r}; known: {', '.join(NAMES)}")


def consumer(projection: Projection) -> ConsumerSpec:
    """The durable pull consumer of one projection: redelivered in order, slowly on failure."""
    return ConsumerSpec(
        name=consumer_name(projection.name),
        stream=projection.stream,
        filter_subjects=read_through(projection),
        passes_over=True,
        max_deliver=50,
        ack_wait_s=60.0,
        backoff_s=BACKOFF_S,
        max_ack_pending=4096,
        description=f"projector: the {projection.name} read model",
    )


def read_through(projection: Projection) -> tuple[str, ...]:
    """What a projection's consumer reads: a projection of several SESSIONS subjects reads the
    whole stream and passes over the rest (`LiveRunner.handle`). For each message it delivers,
    nats-server finds the next one matching a consumer's filters. Several wildcard filters
    over a stream of many sessions are matched against every subject of a message block, so
    a consumer a few thousand messages behind (a projection deferred under a fleet) cost the
    server about half its CPU; the whole stream is read in order, a message at a time."""
    if projection.stream == SESSIONS.name and len(projection.filters) > 1:
        return (subjects.SESSIONS_ALL,)
    return projection.filters


def _static() -> tuple[ConsumerSpec, ...]:
    from zoneinfo import ZoneInfo

    options = Options(Target(), ZoneInfo("UTC"))
    return tuple(consumer(build(name, options)) for name in NAMES)


CONSUMERS: tuple[ConsumerSpec, ...] = _static()
