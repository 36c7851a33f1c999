"""`tavern dream`: offline consolidation of a scope's observations (acp.md §16). A dry run
writes nothing; `apply` writes only the candidate pool, the run ledger and cold marks, never an
observation. Review sets human decisions, which later runs keep."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from tavern_consolidator.domain import dreaming
from tavern_consolidator.domain.dreaming import DreamPlan
from tavern_consolidator.errors import RequestInvalid
from tavern_consolidator.store import PoolSource, audit, connection, dreams, facts, transaction
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

Clock = Callable[[], datetime]
SHOWN = 50
DECISIONS = {"approve": "approved", "reject": "rejected"}


class Dreaming:
    def __init__(self, pool: PoolSource, archive_days: int, clock: Clock) -> None:
        self._pool, self._archive_days, self._clock = pool, archive_days, clock

    async def run(self, scope_id: str | None, apply: bool, actor: str) -> dict[str, Any]:
        async with connection(self._pool) as conn:
            scopes = [scope_id] if scope_id else await facts.scopes_with_observations(conn)
        runs = [await self._scope(s, apply, actor) for s in scopes]
        return {"dry_run": not apply, "scopes": runs}

    async def _scope(self, scope_id: str, apply: bool, actor: str) -> dict[str, Any]:
        now = self._clock()
        async with connection(self._pool) as conn:
            observations = await facts.observations_of_scope(conn, scope_id)
            evidence = await facts.evidence_of_scope(conn, scope_id)
            plan = dreaming.dream(scope_id, observations, evidence, now, self._archive_days)
            stored = await dreams.states(conn, [e.id for e in plan.entries])
        entries = dreaming.keep_decisions(plan.entries, stored)
        result = _summary(plan, entries, stored)
        if apply:
            result["run_id"] = await self._apply(plan, entries, stored, actor)
        log.info("dream_run", scope_id=scope_id, dry_run=not apply, clusters=len(entries))
        return result

    async def _apply(
        self,
        plan: DreamPlan,
        entries: Sequence[dreaming.PoolEntry],
        stored: dict[str, str],
        actor: str,
    ) -> int:
        window = (min((e.first_seen for e in entries), default=None), self._clock())
        async with transaction(self._pool) as conn:
            inserted, updated = await dreams.upsert(conn, entries)
            run_id = await dreams.record_run(conn, plan, window)
            await dreams.mark_cold(conn, plan, run_id)
            payload = {
                "runId": run_id,
                "inserted": inserted,
                "updated": updated,
                "clusters": len(entries),
                "consensus": plan.consensus,
                "archivedObservations": len(plan.forget.observations),
                "archivedEvidence": len(plan.forget.evidence),
            }
            await audit.append(
                conn,
                audit.Entry(
                    "dream", plan.scope_id, actor, f"dreaming run id={run_id}", None, payload
                ),
            )
        return run_id

    async def review(
        self, op: str, ids: Sequence[str], scope_id: str | None, domain: str | None, actor: str
    ) -> dict[str, Any]:
        if op == "list":
            async with connection(self._pool) as conn:
                rows = await dreams.pool(conn, scope_id, domain, None)
            return {"candidates": [dreams.entry_view(e) for e in rows]}
        if op not in DECISIONS or not ids:
            raise RequestInvalid("review is list, or approve/reject with candidate ids")
        async with transaction(self._pool) as conn:
            changed = await dreams.decide(conn, ids, DECISIONS[op], actor)
            for row in changed:
                payload = {
                    "from": row["before"],
                    "to": DECISIONS[op],
                    "claimDomain": row["claim_domain"],
                    "subject": row["subject"],
                }
                await audit.append(
                    conn,
                    audit.Entry(
                        "dream_review",
                        row["scope_id"],
                        actor,
                        f"dream review {op}",
                        row["id"],
                        payload,
                    ),
                )
        missing = sorted(set(ids) - {r["id"] for r in changed})
        return {"decided": [r["id"] for r in changed], "missing": missing}


def _summary(
    plan: DreamPlan, entries: Sequence[dreaming.PoolEntry], stored: dict[str, str]
) -> dict[str, Any]:
    return {
        "scope_id": plan.scope_id,
        "scanned": plan.scanned,
        "clusters": len(entries),
        "consensus": sum(1 for e in entries if e.state == "consensus"),
        "new": sum(1 for e in entries if e.id not in stored),
        "kept_decisions": sum(1 for e in entries if stored.get(e.id) in dreaming.HUMAN_STATES),
        "forget": {
            "cutoff": plan.forget.cutoff.isoformat(),
            "observations": list(plan.forget.observations),
            "evidence": list(plan.forget.evidence),
        },
        "entries": [dreams.entry_view(e) for e in entries[:SHOWN]],
    }
