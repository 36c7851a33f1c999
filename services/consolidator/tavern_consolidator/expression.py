"""Expression promotion (acp.md §17.3): a style observation proposes a candidate (kept by the
ledger, five states); the policy decides at once only when auto-promotion is on and its floors
hold, otherwise an approval request waits to be surfaced at the session's next step."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from tavern_consolidator.domain import policy
from tavern_consolidator.errors import LedgerRefused
from tavern_consolidator.ledger_client import LedgerClient
from tavern_consolidator.store import PoolSource, audit, connection, expression, transaction
from tavern_consolidator.store.facts import evidence_in, scope_of_session
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

Clock = Callable[[], datetime]
DECISIONS = {"approve": "promote", "reject": "reject", "rollback": "rollback"}
SURFACE_LIMIT = 3


class Expression:
    def __init__(
        self, pool: PoolSource, ledger: LedgerClient, config: policy.PolicyConfig, clock: Clock
    ) -> None:
        self._pool, self._ledger, self._config, self._clock = pool, ledger, config, clock

    async def consider(self, scope_id: str, evidence_ids: tuple[str, ...]) -> None:
        """Propose (or find) the candidate of a style observation and apply the policy; a
        candidate a human or the policy already decided is left as it is."""
        try:
            reply = await self._ledger.consolidation(
                "candidate.create",
                scope_id=scope_id,
                domain="style",
                evidence_ids=list(evidence_ids),
            )
        except LedgerRefused as exc:
            log.warning("expression_refused", scope_id=scope_id, error=exc.message)
            return
        candidate = reply["candidate"]
        if candidate["state"] != "proposed":
            return
        verdict = await self._evaluate(candidate)
        if verdict.decision == "promote":
            candidate = await self._transition(
                candidate["candidate_id"], "promote", verdict.reason, verdict.snapshot
            )
        async with transaction(self._pool) as conn:
            await expression.save(
                conn, candidate, verdict.decision, verdict.reason, verdict.snapshot
            )
        log.info(
            "expression_evaluated",
            candidate_id=candidate["candidate_id"],
            decision=verdict.decision,
        )

    async def _evaluate(self, candidate: dict[str, Any]) -> policy.Verdict:
        async with connection(self._pool) as conn:
            rows = await evidence_in(conn, candidate["evidence_ids"])
            others = await expression.conflicting(
                conn, candidate["scope_id"], candidate["candidate_id"]
            )
        return policy.evaluate("proposed", list(rows.values()), others, self._config, self._clock())

    async def _transition(
        self,
        candidate_id: str,
        event: str,
        reason: str,
        snapshot: dict[str, Any] | None,
        actor: str = "consolidation",
    ) -> dict[str, Any]:
        reply = await self._ledger.consolidation(
            "candidate.transition",
            candidate_id=candidate_id,
            event=event,
            reason=reason,
            policy=snapshot,
            actor=actor,
        )
        found: dict[str, Any] = reply["candidate"]
        return found

    async def surface(self, session_id: str) -> dict[str, Any]:
        """Approval requests for the session's next step (each one is surfaced once). Most
        steps have none: one read says so, without a transaction."""
        async with connection(self._pool) as conn:
            scope, waiting = await expression.waiting(conn, session_id)
        if not waiting:
            return {"scope_id": scope, "requests": []}
        async with transaction(self._pool) as conn:
            scope = await scope_of_session(conn, session_id)
            pending = await expression.surface(conn, scope, self._clock(), SURFACE_LIMIT)
            texts = await evidence_in(conn, [e for p in pending for e in p["evidence_ids"]])
        requests = [_request(p, texts) for p in pending]
        return {"scope_id": scope, "requests": requests}

    async def decide(self, candidate_id: str, decision: str, actor: str) -> dict[str, Any]:
        """A human decision: approve (promote), reject, or roll back a promoted style."""
        reason = "manual-approval" if decision == "approve" else f"manual-{decision}"
        candidate = await self._transition(candidate_id, DECISIONS[decision], reason, None, actor)
        async with transaction(self._pool) as conn:
            await expression.save(conn, candidate, decision, reason, None)
            entry = audit.Entry(
                f"expression_{decision}", candidate["scope_id"], actor, reason, candidate_id
            )
            await audit.append(conn, entry)
        return {"candidate": candidate}

    async def listing(self, scope_id: str | None, pending_only: bool) -> dict[str, Any]:
        async with connection(self._pool) as conn:
            rows = await expression.listed(conn, scope_id, ["proposed"] if pending_only else None)
        return {"candidates": rows}


def _request(pending: dict[str, Any], texts: dict[str, Any]) -> dict[str, Any]:
    lines = ["AgentTavern expression promotion (approve | reject)"]
    for eid in pending["evidence_ids"]:
        e = texts.get(eid)
        lines.append(f"evidence {eid}: {e.text[:200] if e else '(unknown)'}")
    return {
        "candidate_id": pending["candidate_id"],
        "tool_name": "consolidator.promotion",
        "reason": "\n".join(lines),
        "policy_reason": pending["reason"],
    }
