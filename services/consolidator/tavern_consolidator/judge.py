"""A model's judgement of new claims of fact (on when a model is configured and
`TAVERN_CONSOLIDATOR_JUDGE_CLAIMS` is true): for each, the same speaker's earlier claims it may
relate to are shown to the model in one prompt; an UPDATE or CONTRADICT it names is ended by the
ledger (`claim.supersede`), which checks it and writes lineage and audit. A bounded number per
run; an unusable answer, a model failure or a ledger refusal is logged and applies nothing, and
never holds intake back (this runs as a scheduler job, after the copies are saved)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tavern_consolidator.domain import judge
from tavern_consolidator.domain.judge import Claim, Judged
from tavern_consolidator.errors import LedgerRefused, LedgerUnavailable
from tavern_consolidator.ledger_client import LedgerClient
from tavern_consolidator.model import Model
from tavern_consolidator.store import PoolSource, connection
from tavern_consolidator.store import claims as store
from tavern_llm import ProviderError
from tavern_runtime.logs import get_logger
from tavern_runtime.secretscan import redact_secrets

log = get_logger(__name__)

MAX_PER_RUN = 20
"""Claims one run judges at most (the scope is woken again while more await)."""
MAX_ANSWER_TOKENS = 200


class Judge:
    def __init__(self, pool: PoolSource, model: Callable[[], Model], ledger: LedgerClient) -> None:
        self._pool, self._model, self._ledger = pool, model, ledger

    async def run(self, scope_id: str) -> dict[str, Any]:
        """Judge the scope's claims awaiting it; `more`: others still wait."""
        if not self._model().configured:
            return {"judged": 0, "more": False}
        async with connection(self._pool) as conn:
            claims = await store.pending(conn, scope_id, MAX_PER_RUN + 1)
        batch = claims[:MAX_PER_RUN]
        superseded = 0
        for claim in batch:
            superseded += await self._judge(claim)
            async with connection(self._pool) as conn:
                await store.judged(conn, [claim.id])
        if batch:
            log.info("claims_judged", scope_id=scope_id, judged=len(batch), superseded=superseded)
        return {"judged": len(batch), "superseded": superseded, "more": len(claims) > len(batch)}

    async def _judge(self, claim: Claim) -> int:
        async with connection(self._pool) as conn:
            candidates = judge.related(claim, await store.earlier(conn, claim))
        if not candidates:
            return 0
        try:
            answer = await self._model().answer(judge.prompt(claim, candidates), MAX_ANSWER_TOKENS)
        except (ProviderError, TimeoutError) as exc:
            detail = redact_secrets(getattr(exc, "message", "") or type(exc).__name__)
            log.warning("claim_judgement_failed", evidence_id=claim.id, error=detail[:200])
            return 0
        judged = judge.parse(answer, candidates)
        if not isinstance(judged, Judged):
            log.warning("claim_judgement_unusable", evidence_id=claim.id, why=judged.why)
            return 0
        if judged.decision == "add":
            return 0
        return await self._supersede(claim, judged)

    async def _supersede(self, claim: Claim, judged: Judged) -> int:
        reason = f"model judged: {judged.decision}" + (
            f" ({judged.reason})" if judged.reason else ""
        )
        try:
            reply = await self._ledger.supersede_claims(
                claim.id, judged.replaces, judged.decision, reason
            )
        except (LedgerRefused, LedgerUnavailable) as exc:
            log.warning("claim_judgement_refused", evidence_id=claim.id, error=str(exc)[:300])
            return 0
        return len(reply.get("superseded", []))
