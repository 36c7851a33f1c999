"""How a distilled batch reaches the ledger: in requests of up to `MAX_PROPOSED` observations,
and, when the ledger refuses a request whole, one by one so that only the bad one is lost."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

from tavern_consolidator.distillation import Distillation, Retry
from tavern_consolidator.domain.records import Proposed
from tavern_consolidator.domain.throttle import Thresholds
from tavern_consolidator.errors import LedgerRefused
from tavern_consolidator.ledger_client import LedgerClient
from tavern_consolidator.store.batches import BatchRow
from tavern_events.rpc.ledger import MAX_PROPOSED

AT = datetime(2026, 1, 1, tzinfo=UTC)


class Ledger:
    """Answers as the ledger would: stored, unless the text is `bad` (refused); refuses a
    whole request that holds a bad one when `whole_refusal` is set."""

    def __init__(self, whole_refusal: bool) -> None:
        self.whole_refusal = whole_refusal
        self.requests: list[int] = []

    async def propose_batch(
        self, scope_id: str, batch: Sequence[Proposed], observed_at: datetime
    ) -> list[dict[str, Any]]:
        self.requests.append(len(batch))
        if self.whole_refusal and any(o.text == "bad" for o in batch):
            raise LedgerRefused("observation.propose_batch: invalid: text too long")
        return [self._answer(o) for o in batch]

    async def propose(self, scope_id: str, obs: Proposed, observed_at: datetime) -> dict[str, Any]:
        self.requests.append(1)
        answer = self._answer(obs)
        if "error" in answer:
            raise LedgerRefused("observation.propose: invalid: text too long")
        return answer

    @staticmethod
    def _answer(obs: Proposed) -> dict[str, Any]:
        if obs.text == "bad":
            return {"error": {"code": "invalid", "message": "text too long"}}
        return {"stored": True, "observation_id": f"obs_{obs.subject}"}


async def _written(ledger: Ledger, texts: Sequence[str]) -> int:
    """What proposing `texts` as one distilled batch wrote (no database: only the ledger is
    asked)."""
    observations = tuple(Proposed(f"s{n}", "states", "user_fact", t) for n, t in enumerate(texts))
    row = BatchRow(1, "chat", "distilled", "fallback", AT, "ev", (), observations, 0)
    nothing: Any = None
    client = cast(LedgerClient, ledger)
    distillation = Distillation(nothing, nothing, client, Thresholds(), Retry(), lambda: AT)
    return await distillation._propose_all(row)


async def test_a_batch_goes_in_requests_of_at_most_the_contracts_size() -> None:
    ledger = Ledger(whole_refusal=False)
    assert await _written(ledger, ["fine"] * (MAX_PROPOSED + 5)) == MAX_PROPOSED + 5
    assert ledger.requests == [MAX_PROPOSED, 5]


async def test_one_refused_alone_costs_only_itself() -> None:
    ledger = Ledger(whole_refusal=False)
    assert await _written(ledger, ["fine", "bad", "fine"]) == 2
    assert ledger.requests == [3]


async def test_a_request_refused_whole_is_proposed_again_one_by_one() -> None:
    ledger = Ledger(whole_refusal=True)
    assert await _written(ledger, ["fine", "bad", "fine"]) == 2
    assert ledger.requests == [3, 1, 1, 1]
