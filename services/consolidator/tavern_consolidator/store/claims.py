"""The copies of claims of fact a model judges: those awaiting judgement, and the earlier ones
of the same speaker they may update or contradict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tavern_consolidator.domain.judge import Claim
from tavern_consolidator.store import Conn

CLAIM_COLUMNS = "id, scope_id, speaker, text, observed_at, claim_of"
OF_FACT = "state = 'active' AND claim_kind IN ('fact', 'preference', 'correction')"
EARLIER = 200
"""Earlier claims of the speaker read per judged claim (the newest), ranked in `domain.judge`."""


def _claim(r: Any) -> Claim:
    return Claim(**dict(r))


async def pending(conn: Conn, scope_id: str, limit: int) -> list[Claim]:
    """The scope's oldest claims awaiting judgement (still active)."""
    found = await conn.fetch(
        f"SELECT {CLAIM_COLUMNS} FROM consolidator.evidence "
        f"WHERE scope_id = $1 AND judge_pending AND {OF_FACT} ORDER BY observed_at, id LIMIT $2",
        scope_id,
        limit,
    )
    return [_claim(r) for r in found]


async def earlier(conn: Conn, claim: Claim) -> list[Claim]:
    """Active claims of fact of the same speaker in the scope, said before `claim`."""
    found = await conn.fetch(
        f"SELECT {CLAIM_COLUMNS} FROM consolidator.evidence "
        f"WHERE scope_id = $1 AND speaker = $2 AND observed_at < $3 AND {OF_FACT} "
        f"ORDER BY observed_at DESC LIMIT {EARLIER}",
        claim.scope_id,
        claim.speaker,
        claim.observed_at,
    )
    return [_claim(r) for r in found]


async def judged(conn: Conn, ids: Sequence[str]) -> None:
    """These claims await no more judgement (judged, or the model could not answer)."""
    await conn.execute(
        "UPDATE consolidator.evidence SET judge_pending = false WHERE id = ANY($1::text[])",
        list(ids),
    )
