"""A batch's bookkeeping seen from outside (acp.md §12.3): the watermark is the batch's latest
observed time, not when the evidence was stored, and every run writes a `consolidate` audit
entry that the `audit` RPC returns."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.integration.consolidator.conftest import Tavern
from tests.integration.consolidator.model_server import reply
from tests.integration.loop.providers.openai_server import error
from tests.support import eventually

pytestmark = pytest.mark.integration

FACTS = [f"I keep detail number {i} of my tea habits" for i in range(10)]


async def test_the_watermark_is_the_latest_observed_time_of_the_batch(tavern: Tavern) -> None:
    await tavern.session("s1")
    await tavern.say("s1", *FACTS, day=-30)  # said a month ago, stored now
    [batch] = await tavern.ok_batches("s1")
    said_last = tavern.at(len(FACTS) + 1, day=-30)  # seq 2..11
    watermark, watermark_id = await tavern.watermark("s1") or (None, "")
    assert watermark == said_last
    assert watermark_id == batch["last_id"]
    stored = await tavern.db.fetchval(
        "SELECT max(created_at) FROM ledger.evidence WHERE session_id = 's1'"
    )
    assert stored - watermark > timedelta(days=29)  # the time it was stored plays no part


async def test_a_successful_batch_writes_a_consolidate_audit_entry(tavern: Tavern) -> None:
    tavern.model.responder = lambda records: reply([])
    await tavern.session("s1")
    await tavern.say("s1", *FACTS)
    [batch] = await tavern.ok_batches("s1")
    trail = await tavern.rpc("consolidator", "audit", scope_id="s1", op="consolidate")
    [entry] = trail["entries"]
    assert (entry["actor"], entry["reason"]) == (
        "consolidation",
        "consolidation ok; watermark advanced",
    )
    assert entry["target_id"] == f"batch:{batch['id']}"
    payload = entry["payload"]
    assert payload["batchSize"] == 10
    assert payload["observations"] == 0
    assert (payload["batchFirstId"], payload["batchLastId"]) == (
        batch["first_id"],
        batch["last_id"],
    )
    assert payload["batchTo"] == batch["batch_to"].isoformat()


async def test_a_failed_batch_is_audited_and_leaves_the_watermark(tavern: Tavern) -> None:
    tavern.model.enqueue(error(500, {"error": {"message": "boom"}}), error(500, {"error": {}}))
    await tavern.session("s1")
    await tavern.say("s1", *FACTS)

    async def audited() -> list[dict[str, Any]]:
        trail = await tavern.rpc("consolidator", "audit", scope_id="s1", op="consolidate")
        return list(trail["entries"])

    entries = await eventually(audited, timeout=20)
    failed = entries[-1]  # newest first: the oldest is the failure
    assert failed["reason"] == "consolidation failed; watermark not advanced"
    assert "error" in failed["payload"]
    await tavern.ok_batches("s1")  # the same batch is retried and then succeeds
    reasons = [e["reason"] for e in await audited()]
    assert reasons[0] == "consolidation ok; watermark advanced"


async def test_evidence_said_before_the_watermark_but_arriving_after_is_still_digested(
    tavern: Tavern,
) -> None:
    await tavern.session("s1")
    await tavern.say("s1", *FACTS, day=-1)
    [first] = await tavern.ok_batches("s1")
    late = [f"I also keep late detail number {i}" for i in range(10)]
    await tavern.session("s2", chat_id="s1")  # same scope; said two days ago, arriving now
    await tavern.say("s2", *late, day=-2)
    _, second = await tavern.ok_batches("s1", 2)
    assert second["size"] == 10
    assert second["batch_to"] < first["batch_to"]
    watermark, _ = await tavern.watermark("s1") or (None, "")
    assert watermark == first["batch_to"]  # it only ever advances
    explained = await tavern.rpc("consolidator", "explain", evidence_id=second["last_id"])
    assert explained["verdict"] == "digested"
