"""Who may ask the projector what: the principal of each RPC against the owner of the
session it names (`projector.sessions.owner`). A user lists only their own sessions; the
projection status and a replay are for the operator and the services. Assets are held to their
owner in the queries themselves (`Asker.owner_filter`): a user reads only their own cards,
lorebooks and personas, and another user's is answered `not_found` (`errors.NotYours`). Refusals
are logged as `access_refused` with the principal and what it named (the projector keeps no
audit table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tavern_runtime.auth import Credentials
from tavern_runtime.errors import Forbidden, TavernError
from tavern_runtime.logs import get_logger
from tavern_runtime.principals import Principal, may_act

log = get_logger(__name__)

SESSION_BOUND = ("history.search", "scene.get", "character.get", "lore.search")
"""Operations that read a session's read models when the request names a session."""
STAFF_ONLY = ("status", "replay.start", "replay.status")
"""The projections' state and their rebuild: the operator's, and a service's on its own account
(the gateway asks for its owner's operator view)."""


@dataclass(frozen=True)
class Asker:
    """The verified principal of one request, and the owner whose sessions it may list and
    whose assets it may read (None: every owner's)."""

    principal: Principal
    owner_filter: str | None


class Access:
    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    async def check(
        self, pool: Any, operation: str, headers: Mapping[str, str] | None, body: Any
    ) -> Asker:
        """The asker, or `Unauthenticated` / `Forbidden` (logged) if it may not ask this."""
        principal: Principal | None = None
        try:
            principal = self._credentials.principal(headers)
            await self._authorize(pool, principal, operation, body)
        except TavernError as exc:
            log.warning(
                "access_refused",
                rpc=operation,
                code=exc.code,
                principal=principal.label if principal else None,
                session_id=_session_of(body),
                reason=exc.message,
            )
            raise
        return Asker(principal, principal.user)

    async def _authorize(self, pool: Any, principal: Principal, operation: str, body: Any) -> None:
        if operation in STAFF_ONLY and principal.user is not None:
            raise Forbidden(f"{operation} is for the operator and the services")
        session_id = _session_of(body)
        if operation not in SESSION_BOUND or session_id is None or principal.kind == "operator":
            return
        async with pool.acquire() as conn:
            owner = await conn.fetchval(
                "SELECT owner FROM projector.sessions WHERE session_id = $1", session_id
            )
        if owner is None and principal.kind == "service":
            return  # a session the read models have not seen yet: nothing of it to read
        if not may_act(principal, owner):
            raise Forbidden(f"{principal.label} may not read session {session_id!r}")


def _session_of(body: Any) -> str | None:
    value = body.get("session_id") if isinstance(body, dict) else None
    return value if isinstance(value, str) else None
