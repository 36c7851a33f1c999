"""A session's binding read straight from its log, for a request that arrives before the
bindings consumer has applied it (a busy system can lag by thousands of events, and a session's
first tool call comes right after its `session/created`). The scope still comes from the
session's own log, never from the request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from nats.js import JetStreamContext

from tavern_events.envelope import SessionEvent
from tavern_events.errors import ContractError
from tavern_ledger.domain.bindings import Effect, effect_of
from tavern_ledger.scopes import bindings
from tavern_ledger.scopes.bindings import Conn
from tavern_runtime.logs import get_logger
from tavern_runtime.sessionlog import SessionLogReader

log = get_logger(__name__)

BINDING_EVENTS = ("session/created", "session/binding-changed")

CatchUp = Callable[[str], Awaitable[bool]]
"""Apply `session_id`'s binding from its log; True if the session is bound now."""


async def binding_effects(js: JetStreamContext, session_id: str) -> list[Effect]:
    """The last `session/created` and `session/binding-changed` of the session, in log order."""
    found: list[SessionEvent] = []
    reader = SessionLogReader(js)
    for event_type in BINDING_EVENTS:
        try:
            event = await reader.last(session_id, event_type)
        except ContractError as exc:  # the bindings consumer dead-letters it; nothing to apply
            log.warning("binding_unreadable", session_id=session_id, error=str(exc))
            continue
        if event is not None:
            found.append(event)
    effects = [effect_of(e) for e in sorted(found, key=lambda e: e.seq)]
    return [e for e in effects if e is not None]


async def apply_effects(conn: Conn, effects: list[Effect]) -> bool:
    """Apply in order (idempotent: a binding older than the stored one is stale)."""
    applied = False
    for effect in effects:
        applied = await bindings.apply(conn, effect) != "missing" or applied
    return applied
