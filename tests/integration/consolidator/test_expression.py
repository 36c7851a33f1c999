"""Expression promotion: style observations become candidates the ledger keeps (five states),
approval requests surface once at the next step, policy floors cannot be lowered by config."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.consolidator.conftest import Tavern, tavern_cli
from tests.integration.consolidator.model_server import reply
from tests.support import eventually

pytestmark = pytest.mark.integration

LINES = [f"please answer me in short bullet points, message {i}" for i in range(10)]


def style_from(cited: int) -> Any:
    return lambda records: reply(
        [{"subject": "answers", "predicate": "formatted_as", "claimDomain": "style",
          "text": "short bullet points", "evidenceIds": [r["id"] for r in records[:cited]]}]
    )  # fmt: skip


async def candidate(tavern: Tavern) -> dict[str, Any]:
    async def check() -> dict[str, Any]:
        row = await tavern.db.fetchrow("SELECT * FROM consolidator.expression")
        return dict(row) if row else {}

    found: dict[str, Any] = await eventually(check)
    return found


async def test_a_style_waits_for_approval_surfaced_once_and_can_be_rolled_back(
    tavern: Tavern,
) -> None:
    tavern.model.responder = style_from(2)
    await tavern.session("s1")
    await tavern.say("s1", *LINES)
    held = await candidate(tavern)
    assert (held["state"], held["decision"]) == ("proposed", "hold")
    assert held["reason"] == "automatic promotion disabled (auto_promote=false)"
    statuses = await tavern.db.fetch(
        "SELECT metadata->>'reviewStatus' AS s FROM ledger.evidence WHERE id = ANY($1::text[])",
        held["evidence_ids"],
    )
    assert {r["s"] for r in statuses} == {"pending_promotion"}

    first = await tavern.rpc("consolidator", "approvals.next", session_id="s1")
    again = await tavern.rpc("consolidator", "approvals.next", session_id="s1")
    assert [r["candidate_id"] for r in first["requests"]] == [held["candidate_id"]]
    assert again["requests"] == []

    cid = held["candidate_id"]
    code, out = await tavern_cli(tavern, "rules", "style", "approve", cid, "--actor", "alice")
    assert code == 0
    assert json.loads(out)["candidate"]["state"] == "promoted"
    await tavern_cli(tavern, "rules", "style", "rollback", cid, "--actor", "bob")
    code, out = await tavern_cli(tavern, "rules", "style", "approve", cid)
    assert code == 1
    assert "illegal transition" in out
    events = await tavern.db.fetch(
        "SELECT event, actor FROM ledger.candidate_events WHERE candidate_id = $1 ORDER BY id", cid
    )
    assert [(e["event"], e["actor"]) for e in events] == [
        ("create", "consolidation"), ("promote", "alice"), ("rollback", "bob"),
    ]  # fmt: skip
    assert await tavern.db.fetchval("SELECT state FROM ledger.candidate") == "rolled_back"


LOWERED = {
    "consolidator_auto_promote": True,
    "consolidator_policy_min_events": 0,
    "consolidator_policy_min_strong": 0,
    "consolidator_policy_max_age_days": 3650,
}


@pytest.mark.parametrize("consolidator_options", [LOWERED])
@pytest.mark.parametrize(("cited", "state"), [(1, "proposed"), (2, "promoted")])
async def test_policy_floors_cannot_be_lowered_by_config(
    tavern: Tavern, cited: int, state: str
) -> None:
    tavern.model.responder = style_from(cited)
    await tavern.session("s1")
    await tavern.say("s1", *LINES)
    found = await candidate(tavern)
    assert found["state"] == state
    floors = found["policy"] if isinstance(found["policy"], dict) else json.loads(found["policy"])
    effective = floors["floors"]["effective"]
    assert (effective["min_events"], effective["min_strong"]) == (2, 1)
    assert effective["max_age_days"] == 30
    if state == "proposed":
        assert found["reason"] == "1/2 compatible events"
