"""`tavern.rpc.consolidator.profile.get`: the scope's profile built from its observations at
read time (nothing is stored), weighted with the candidate pool's support."""

from __future__ import annotations

from typing import Any

from tavern_consolidator.domain import profile
from tavern_consolidator.errors import RequestInvalid
from tavern_consolidator.store import PoolSource, connection, dreams, facts


class Profiles:
    def __init__(self, pool: PoolSource) -> None:
        self._pool = pool

    async def get(self, scope_id: str | None, session_id: str | None) -> dict[str, Any]:
        """The profile of a scope, or of the scope a session is bound to."""
        if not scope_id and not session_id:
            raise RequestInvalid("a profile is asked for by scope_id or session_id")
        async with connection(self._pool) as conn:
            scope = scope_id or await facts.scope_of_session(conn, session_id or "")
            rows = await facts.observations_of_scope(
                conn, scope, list(profile.ARRAY_OF_DOMAIN), active_only=True
            )
            evidence = await facts.evidence_in(conn, [e for o in rows for e in o.evidence_ids])
            pool = await dreams.holding(conn, [o.id for o in rows])
        built = profile.build(scope, rows, evidence, profile.support_of(pool))
        return profile.as_json(built)
