"""Request/reply to the ledger: observations through `tavern.rpc.ledger.observation.propose`,
claims a model judged superseded through `claim.supersede`, rules and expression candidates
through `tavern.rpc.ledger.consolidation.*`. The only place that sees NATS errors of these
calls; a rate-limited call waits and tries again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

import nats.errors
from nats.aio.client import Client

from tavern_consolidator.domain.records import Proposed
from tavern_consolidator.errors import LedgerRefused, LedgerUnavailable
from tavern_events import subjects
from tavern_events.replies import ErrorBody, error_of, timeout_headers

TIMEOUT_S = 10.0
RATE_LIMIT_WAITS_S = (0.1, 0.2, 0.5, 1.0, 2.0, 2.0, 2.0)
ACTOR = "consolidation"
JUDGE_ACTOR = "consolidator"
"""The audit's actor of the claims a model judged superseded."""


class LedgerClient:
    def __init__(
        self,
        nc: Callable[[], Client],
        timeout_s: float = TIMEOUT_S,
        headers: Callable[[], dict[str, str]] = dict,
    ) -> None:
        """`headers` gives each request its principal (`Credentials.headers`)."""
        self._nc, self._timeout, self._headers = nc, timeout_s, headers

    async def call(self, op: str, body: dict[str, Any]) -> dict[str, Any]:
        """The reply of `tavern.rpc.ledger.<op>`; an error reply raises."""
        for wait in (*RATE_LIMIT_WAITS_S, None):
            reply = await self._request(op, body)
            error = reply.get("error")
            if not error:
                return reply
            if error.get("code") != "rate_limited" or wait is None:
                raise _refusal(op, error)
            await asyncio.sleep(wait)
        raise LedgerUnavailable(f"{op}: still rate limited")  # pragma: no cover - loop returns

    async def owned(self, scope_id: str, headers: dict[str, str]) -> bool:
        """Whether the ledger lets the principal of `headers` read `scope_id` (its owner's
        check: `tavern.rpc.ledger.stats` asked as that principal)."""
        reply = await self._request("stats", {"scope_id": scope_id}, headers)
        error = reply.get("error")
        if not error:
            return True
        if error.get("code") in ("forbidden", "unauthenticated"):
            return False
        raise _refusal("stats", error)

    async def _request(
        self, op: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> dict[str, Any]:
        data = json.dumps({"actor": ACTOR, **body}, ensure_ascii=False, default=str).encode()
        try:
            msg = await self._nc().request(
                subjects.rpc("ledger", op),
                data,
                timeout=self._timeout,
                headers={**timeout_headers(self._timeout), **(headers or self._headers())},
            )
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError, TimeoutError) as exc:
            raise LedgerUnavailable(f"{op}: {type(exc).__name__}") from exc
        except nats.errors.Error as exc:
            raise LedgerUnavailable(f"{op}: {exc!r}") from exc
        found: dict[str, Any] = json.loads(msg.data)
        return found

    async def propose(self, scope_id: str, obs: Proposed, observed_at: datetime) -> dict[str, Any]:
        return await self.call(
            "observation.propose",
            {"scope_id": scope_id, **_observation(obs), "observed_at": observed_at.isoformat()},
        )

    async def propose_batch(
        self, scope_id: str, batch: Sequence[Proposed], observed_at: datetime
    ) -> list[dict[str, Any]]:
        """`observation.propose_batch`: one answer per observation, in order (a reply, or
        `{"error": ...}` for one the ledger refused on its own)."""
        reply = await self.call(
            "observation.propose_batch",
            {
                "scope_id": scope_id,
                "observations": [_observation(obs) for obs in batch],
                "observed_at": observed_at.isoformat(),
            },
        )
        items: list[dict[str, Any]] = reply["items"]
        return items

    async def supersede_claims(
        self, evidence_id: str, supersedes: Sequence[str], decision: str, reason: str
    ) -> dict[str, Any]:
        """`claim.supersede`: end the earlier claims the model judged `evidence_id` updates or
        contradicts (the ledger checks each; asked again, nothing changes)."""
        body = {
            "actor": JUDGE_ACTOR,
            "evidence_id": evidence_id,
            "supersedes": list(supersedes),
            "decision": decision,
            "reason": reason[:500],
        }
        return await self.call("claim.supersede", body)

    async def consolidation(self, op: str, **body: Any) -> dict[str, Any]:
        """`tavern.rpc.ledger.consolidation.<op>` (rules and expression candidates)."""
        return await self.call(
            f"consolidation.{op}", {k: v for k, v in body.items() if v is not None}
        )


def _observation(obs: Proposed) -> dict[str, Any]:
    """The contract's fields of one observation (`ProposedObservation`): the same names."""
    return asdict(obs)


def _refusal(op: str, raw: dict[str, Any]) -> Exception:
    """A ledger error (`tavern_events.replies`): one that may pass (retryable, or a bug on the
    ledger's side) is unavailable, the work is tried again later; else a refusal."""
    error = error_of({"error": raw}) or ErrorBody(code="internal", message="", retryable=True)
    text = f"{op}: {error.code}: {error.message}"
    if error.retryable or error.code == "internal":
        return LedgerUnavailable(text)
    return LedgerRefused(text, ledger_code=error.code)
