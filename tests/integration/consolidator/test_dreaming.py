"""`tavern dream` and the profile: clusters and recurrence from the consolidator's copies, a dry
run that writes nothing, an apply that writes only the pool, human decisions that survive."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.consolidator.conftest import Tavern, tavern_cli
from tests.integration.consolidator.model_server import reply
from tests.support import eventually

pytestmark = pytest.mark.integration

WORDS = [f"note {i} about how I take my tea" for i in range(10)]


def about_tea(predicate: str, domain: str = "user_preference") -> Any:
    return lambda records: reply(
        [{"subject": "tea", "predicate": predicate, "claimDomain": domain,
          "text": f"the user {predicate} strong black tea", "evidenceIds": [records[0]["id"]]},
         {"subject": f"lone-{predicate}", "predicate": "is", "claimDomain": "work",
          "text": f"a one-off remark {predicate}", "evidenceIds": [records[1]["id"]]}]
    )  # fmt: skip


async def two_sessions_about_tea(tavern: Tavern) -> None:
    """Two sessions of chat c1, each distilled into a tea observation and a one-off."""
    tavern.model.responder = about_tea("likes")
    await tavern.session("s1", chat_id="c1")
    await tavern.say("s1", *WORDS)
    await tavern.ok_batches("c1")
    tavern.model.responder = about_tea("drinks")
    await tavern.session("s2", chat_id="c1")
    await tavern.say("s2", *WORDS)
    await tavern.ok_batches("c1", 2)
    await eventually(lambda: _copied_observations(tavern, 4))


async def _copied_observations(tavern: Tavern, n: int) -> bool:
    found = await tavern.db.fetchval("SELECT count(*) FROM consolidator.observation")
    return bool(found == n)


async def counts(tavern: Tavern) -> dict[str, int]:
    tables = ("consolidator.candidate_memory", "consolidator.dream_run", "consolidator.forget_mark",
              "ledger.observation", "consolidator.observation")  # fmt: skip
    return {t: await tavern.db.fetchval(f"SELECT count(*) FROM {t}") for t in tables}


async def test_dry_run_writes_nothing_and_apply_writes_only_the_pool(tavern: Tavern) -> None:
    await two_sessions_about_tea(tavern)
    before = await counts(tavern)

    code, out = await tavern_cli(tavern, "dream", "--scope", "c1")
    [scope] = json.loads(out)["scopes"]
    assert code == 0
    assert (scope["clusters"], scope["consensus"], scope["scanned"]) == (3, 1, 4)
    assert await counts(tavern) == before

    code, out = await tavern_cli(tavern, "dream", "--scope", "c1", "--apply")
    assert code == 0
    after = await counts(tavern)
    assert after["consolidator.candidate_memory"] == 3
    assert after["consolidator.dream_run"] == 1
    unchanged = ("ledger.observation", "consolidator.observation")
    assert all(after[t] == before[t] for t in unchanged)
    consensus = await tavern.db.fetchrow(
        "SELECT * FROM consolidator.candidate_memory WHERE state = 'consensus'"
    )
    assert consensus["sessions"] == ["s1", "s2"]
    assert consensus["occurrences"] == 2


async def test_human_decisions_survive_reruns_and_weigh_in_the_profile(tavern: Tavern) -> None:
    await two_sessions_about_tea(tavern)
    await tavern_cli(tavern, "dream", "--apply")
    _code, out = await tavern_cli(tavern, "dream", "review", "--list", "--domain", "work")
    lone = [c["id"] for c in json.loads(out)["candidates"]]
    consensus = await tavern.db.fetchval(
        "SELECT id FROM consolidator.candidate_memory WHERE state = 'consensus'"
    )
    await tavern_cli(tavern, "dream", "review", "--approve", consensus)
    await tavern_cli(tavern, "dream", "review", "--reject", lone[0])
    await tavern_cli(tavern, "dream", "--apply")

    states = dict(await tavern.db.fetch("SELECT id, state FROM consolidator.candidate_memory"))
    assert states[consensus] == "approved"
    assert states[lone[0]] == "rejected"
    reviews = await tavern.db.fetchval(
        "SELECT count(*) FROM consolidator.audit WHERE op = 'dream_review'"
    )
    assert reviews == 2

    profile = await tavern.rpc("consolidator", "profile.get", session_id="s2")
    weights = {p["predicate"]: p["weight"] for p in profile["preferences"]}
    assert weights == {"likes": 0.72, "drinks": 0.72}  # base 0.6 + approved 0.12
    [trace] = profile["preferences"][0]["trace"]
    origin = await tavern.db.fetchrow(
        "SELECT session_id, source_event_id FROM ledger.evidence WHERE id = $1",
        trace["evidence_id"],
    )
    assert trace["origin"]["session_id"] == origin["session_id"] == "s1"
    assert trace["origin"]["event_id"] == origin["source_event_id"]
    assert profile["stableFacts"] == []
    assert {c["section"] for c in profile["candidates"]} == {"user_model"}


async def test_dreaming_tables_live_only_in_the_consolidator_schema(tavern: Tavern) -> None:
    found = await tavern.db.fetch(
        "SELECT table_schema || '.' || table_name AS name FROM information_schema.tables "
        "WHERE table_name IN ('candidate_memory', 'dream_run') ORDER BY 1"
    )
    assert [r["name"] for r in found] == ["consolidator.candidate_memory", "consolidator.dream_run"]
