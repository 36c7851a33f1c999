"""Background distillation through the real ledger and a loopback model: thresholds, watermark,
failures, fallback, the strict output schema, and what the ledger does with the proposals."""
# ruff: noqa: RUF001 - full-width characters are test data (Chinese text)

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.consolidator.conftest import Tavern
from tests.integration.consolidator.model_server import reply, truncated
from tests.integration.loop.providers.openai_server import error
from tests.support import eventually

pytestmark = pytest.mark.integration

PREFERENCES = [f"I like detail number {i} about my tea habits" for i in range(12)]


async def test_nine_evidence_do_not_trigger_and_the_tenth_does(tavern: Tavern) -> None:
    await tavern.session("s1")
    await tavern.say("s1", *PREFERENCES[:9])
    await eventually(lambda: _copies(tavern, "s1", 9))
    await tavern.settled()
    assert await tavern.batches("s1") == []
    assert tavern.model.distil_requests == []

    await tavern.say("s1", PREFERENCES[9])
    [batch] = await tavern.ok_batches("s1")
    assert (batch["size"], batch["reason"], batch["mode"]) == (10, "evidence", "model")
    assert await tavern.watermark("s1") == (batch["batch_to"], batch["last_id"])
    assert len(await tavern.observations("s1")) == 1


async def _copies(tavern: Tavern, scope: str, n: int) -> bool:
    return await tavern.copies(scope) == n


async def test_five_turns_trigger_a_batch_and_four_do_not(tavern: Tavern) -> None:
    await tavern.session("s1")
    await tavern.say("s1", "I keep configs apart from code", "I prefer four spaces")
    for turn in range(1, 5):
        await tavern.end_turn("s1", turn)
    await eventually(lambda: _copies(tavern, "s1", 2))
    await tavern.settled()
    assert await tavern.batches("s1") == []

    await tavern.end_turn("s1", 5)
    [batch] = await tavern.ok_batches("s1")
    assert (batch["size"], batch["reason"]) == (2, "turns")


async def test_failing_model_leaves_the_watermark_and_the_same_batch_is_retried(
    tavern: Tavern,
) -> None:
    tavern.model.enqueue(error(500, {"error": {"message": "boom"}}), error(500, {"error": {}}))
    await tavern.session("s1")
    await tavern.say("s1", *PREFERENCES[:10])
    [ok] = await tavern.ok_batches("s1")
    failed, retried = await tavern.batches("s1")
    assert failed["status"] == "failed"
    assert "server_error" in failed["error"]
    assert retried["id"] == ok["id"]
    assert retried["failures_before"] == 1
    assert failed["evidence_ids"] == retried["evidence_ids"]
    assert failed["batch_from"] is None
    assert retried["batch_from"] is None
    assert len(tavern.model.distil_requests) == 3  # two attempts, then the retry


async def test_truncated_or_invalid_output_is_a_failure_not_a_partial_success(
    tavern: Tavern,
) -> None:
    bad_id = reply(
        [{"subject": "u", "predicate": "p", "claimDomain": "user_fact", "text": "t",
          "evidenceIds": ["ev_not_in_this_batch"]}]
    )  # fmt: skip
    tavern.model.enqueue(truncated(), bad_id)
    await tavern.session("s1")
    await tavern.say("s1", *PREFERENCES[:10])
    failed = await eventually(lambda: _failed(tavern, "s1"))
    assert "truncated" in failed["error"]
    assert "unknown evidence" in failed["error"]
    assert await tavern.watermark("s1") == (None, "")
    assert await tavern.observations("s1", state=None) == []
    await tavern.ok_batches("s1")  # the next run succeeds with the same items


async def _failed(tavern: Tavern, scope: str) -> dict[str, Any] | None:
    return next((b for b in await tavern.batches(scope) if b["status"] == "failed"), None)


@pytest.mark.parametrize("model_url", ["http://127.0.0.1:9/v1", None])
async def test_without_a_reachable_model_the_rule_fallback_distils(tavern: Tavern) -> None:
    await tavern.session("s1")
    await tavern.say("s1", *PREFERENCES[:10])
    [batch] = await tavern.ok_batches("s1")
    assert batch["mode"] == "fallback"
    assert batch["written"] == 10
    found = await tavern.observations("s1")
    assert {(o["predicate"], o["subject"]) for o in found} == {
        ("states", text[:40]) for text in PREFERENCES[:10]
    }


async def test_same_key_supersedes_with_lineage_and_authority_is_the_weakest(
    tavern: Tavern,
) -> None:
    def keyed(text: str) -> Any:
        return lambda records: reply(
            [{"subject": "tea", "predicate": "prefers", "claimDomain": "user_preference",
              "text": text, "evidenceIds": [r["id"] for r in records]}]
        )  # fmt: skip

    tavern.model.responder = keyed("green tea")
    await tavern.session("s1")
    await tavern.say("s1", "更正：我喜欢绿茶", *PREFERENCES[:9])
    await tavern.ok_batches("s1")
    tavern.model.responder = keyed("black tea")
    await tavern.say("s1", *PREFERENCES[:10])
    await tavern.ok_batches("s1", 2)
    old, new = await tavern.observations("s1", state=None)
    assert (old["text"], old["state"]) == ("green tea", "superseded")
    assert (new["text"], new["state"], new["supersedes"]) == ("black tea", "active", [old["id"]])
    assert old["authority"] == "user_explicit"  # a correction and user input: the weaker wins
    copies = await tavern.db.fetch("SELECT id, state FROM consolidator.observation ORDER BY 2")
    assert [(r["id"], r["state"]) for r in copies] == [
        (new["id"], "active"),
        (old["id"], "superseded"),
    ]


async def test_backlinks_are_tiered_and_a_local_observation_without_one_alerts(
    tavern: Tavern,
) -> None:
    tavern.model.responder = lambda records: reply(
        [
            {"subject": "tea", "predicate": "likes", "claimDomain": "user_fact",
             "text": "likes tea", "evidenceIds": [records[0]["id"]]},
            {"subject": "code", "predicate": "style", "claimDomain": "work",
             "text": "keeps configs apart", "evidenceIds": []},
        ]
    )  # fmt: skip
    await tavern.session("s1")
    await tavern.say("s1", *PREFERENCES[:10])
    await tavern.ok_batches("s1")
    rows = await tavern.db.fetch(
        "SELECT target_id, payload->>'backlink' AS tier FROM ledger.audit "
        "WHERE op = 'observation-upsert' ORDER BY id"
    )
    assert [r["tier"] for r in rows] == ["verifiable", "missing_backlink"]


async def test_a_batch_that_produces_nothing_is_audited_as_processed_and_explained(
    tavern: Tavern,
) -> None:
    tavern.model.responder = lambda records: reply([])
    await tavern.session("s1")
    await tavern.say("s1", *PREFERENCES[:10])
    [batch] = await tavern.ok_batches("s1")
    assert (batch["written"], batch["size"], batch["first_id"]) == (0, 10, batch["evidence_ids"][0])
    assert batch["last_id"] == batch["evidence_ids"][-1]
    explained = await tavern.rpc("consolidator", "explain", evidence_id=batch["first_id"])
    assert explained["verdict"] == "digested"
    await tavern.say("s1", "继续吧")  # an acknowledgement: never digested
    ack = await eventually(lambda: _evidence_id(tavern, "继续吧"))
    explained = await tavern.rpc("consolidator", "explain", evidence_id=ack)
    assert explained["verdict"].startswith("skipped: not digestible")


async def _evidence_id(tavern: Tavern, text: str) -> str | None:
    found = await tavern.db.fetchval("SELECT id FROM consolidator.evidence WHERE text = $1", text)
    return str(found) if found else None


async def test_turns_without_evidence_run_an_empty_batch_that_writes_nothing(
    tavern: Tavern,
) -> None:
    await tavern.session("s1")
    for turn in range(1, 6):
        await tavern.end_turn("s1", turn)
    await tavern.settled()

    async def counted() -> bool:
        pending = await tavern.db.fetchval(
            "SELECT count(*) FROM consolidator.turn WHERE counted_at IS NULL"
        )
        return bool(pending == 0)

    await eventually(counted)
    assert await tavern.batches("s1") == []
    assert await tavern.watermark("s1") == (None, "")
