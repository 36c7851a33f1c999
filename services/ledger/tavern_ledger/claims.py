"""`claim.supersede`: the consolidator's model judged that a new claim of fact updates or
contradicts earlier claims of the same person. The ledger checks what it names
(`domain.judgement`) and ends them as a correction said in chat does (`supersession`), with
lineage, audit (`matched_by: model`) and LEDGER facts, in one transaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tavern_ledger.changes import Actor
from tavern_ledger.domain.judgement import Refused, verdict
from tavern_ledger.errors import InvalidTransition, NotFound
from tavern_ledger.evidence import rows as evidence
from tavern_ledger.ingest import Clock, utc_now
from tavern_ledger.supersession import supersede_claims
from tavern_ledger.transactions import PoolSource, transaction
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

MATCHED_BY = "model"


@dataclass(frozen=True)
class Judgement:
    evidence_id: str
    supersedes: tuple[str, ...]
    decision: str


class Claims:
    def __init__(self, pool: PoolSource, clock: Clock = utc_now) -> None:
        self._pool, self._clock = pool, clock

    async def supersede(self, j: Judgement, actor: Actor) -> dict[str, Any]:
        """End the targets `j` names (each checked); a repeated request changes nothing."""
        now = self._clock()
        async with transaction(self._pool) as conn:
            claim = await evidence.get(conn, j.evidence_id, for_update=True)
            if claim is None:
                raise NotFound(f"evidence {j.evidence_id!r} not found")
            found = {}
            for target_id in sorted(set(j.supersedes)):  # one lock order
                row = await evidence.get(conn, target_id, for_update=True)
                if row is not None:
                    found[target_id] = row
            try:
                judged = verdict(claim, j.supersedes, found)
            except Refused as exc:
                raise InvalidTransition(str(exc)) from exc
            if judged.to_end:
                await supersede_claims(
                    conn,
                    claim,
                    judged.to_end,
                    actor,
                    now,
                    matched_by=MATCHED_BY,
                    decision=j.decision,
                )
        ended = [t.id for t in judged.to_end]
        log.info("claims_judged_superseded", evidence_id=claim.id, superseded=len(ended))
        return {"evidence_id": claim.id, "superseded": ended, "unchanged": list(judged.unchanged)}
