"""Every subscriber and RPC of the projector service: the registration table.

Projections consume ordered batches from durable pull consumers, one per projection
(`catalog.CONSUMERS`), through `consumer.PullLoop`s started after the broker connects. RPCs
answer the read-only `tavern_*` tools on `tavern.rpc.projector.*` in the `projector-rpc`
queue group, so one replica answers each request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

import structlog
from faststream.nats import NatsBroker

from tavern_events import subjects
from tavern_projector import queries
from tavern_projector.access import Access, Asker
from tavern_projector.core import Core
from tavern_projector.errors import NotYours
from tavern_runtime.context import Message
from tavern_runtime.errors import TavernError
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

SERVICE = "projector"
VERSION = version("tavern-projector")
RPC_QUEUE = f"{SERVICE}-rpc"

Query = Callable[[Any, Any], Awaitable[dict[str, Any]]]
RPCS: dict[str, Query] = {
    "history.search": queries.history_search,
    "scene.get": queries.scene_get,
}
"""Read-only queries; each authorizes its principal first (`tavern_projector.access`)."""
OWNED: dict[str, Callable[[Any, Any, str | None], Awaitable[dict[str, Any]]]] = {
    "sessions.list": queries.sessions_list,
    "character.get": queries.character_get,
    "lore.search": queries.lore_search,
}
"""Queries that answer with the asker's own sessions and assets only (every owner's for the
operator and a service on its own account). `replay.start` and `replay.status` (the operator's,
`tavern_projector.replays`) follow."""


def register(broker: NatsBroker, core: Core) -> None:
    """Bind every handler of the service to `broker` (and every projection to its consumer)."""
    access = Access(core.credentials)
    broker.subscriber(subjects.rpc(SERVICE, "ping"), queue=RPC_QUEUE)(ping)
    for runner in core.runners:  # archive, chat, history, sessions, memory, assets
        core.consume(runner)
    broker.subscriber(subjects.rpc(SERVICE, "status"), queue=RPC_QUEUE)(
        _answer(core, access, "status", lambda _pool, body, _asker: core.status(body))
    )
    for operation, query in RPCS.items():
        broker.subscriber(subjects.rpc(SERVICE, operation), queue=RPC_QUEUE)(
            _answer(core, access, operation, _plain(query))
        )
    for operation, owned in OWNED.items():
        broker.subscriber(subjects.rpc(SERVICE, operation), queue=RPC_QUEUE)(
            _answer(core, access, operation, _owned(owned))
        )
    replays = core.replays
    broker.subscriber(subjects.rpc(SERVICE, "replay.start"), queue=RPC_QUEUE)(
        _answer(core, access, "replay.start", lambda _p, b, a: replays.start(b, a.principal.label))
    )
    broker.subscriber(subjects.rpc(SERVICE, "replay.status"), queue=RPC_QUEUE)(
        _answer(core, access, "replay.status", lambda _p, body, _a: replays.status(body))
    )


async def ping() -> dict[str, object]:
    """`tavern.rpc.projector.ping`: which service and version answered over the bus."""
    return {"service": SERVICE, "version": VERSION, "ok": True}


Answer = Callable[[Any, Any, Asker], Awaitable[dict[str, Any]]]


def _plain(query: Query) -> Answer:
    return lambda pool, body, _asker: query(pool, body)


def _owned(query: Callable[[Any, Any, str | None], Awaitable[dict[str, Any]]]) -> Answer:
    return lambda pool, body, asker: query(pool, body, asker.owner_filter)


def _answer(
    core: Core, access: Access, operation: str, query: Answer
) -> Callable[..., Awaitable[dict[str, Any]]]:
    async def answer(body: Any, msg: Message) -> dict[str, Any]:
        try:
            asker = await access.check(core.pool(), operation, msg.headers, body)
            with structlog.contextvars.bound_contextvars(principal=asker.principal.label):
                try:
                    return await query(core.pool(), body, asker)
                except NotYours as exc:  # answered as a missing asset, logged as a refusal
                    _refused(operation, asker, exc)
                    raise
        except TavernError as exc:
            log.info("rpc_refused", operation=operation, code=exc.reply_code(), error=exc.message)
            return exc.as_reply()

    answer.__name__ = answer.__qualname__ = operation.replace(".", "_")
    return answer


def _refused(operation: str, asker: Asker, exc: NotYours) -> None:
    log.warning(
        "access_refused",
        rpc=operation,
        code=exc.reply_code(),
        principal=asker.principal.label,
        asset=exc.asset,
        reason="the asset belongs to another user",
    )
