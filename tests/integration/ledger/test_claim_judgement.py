"""`claim.supersede`: a model's judgement that a new claim updates an earlier one ends it as a
correction said in chat does (state, validity, lineage, audit with `matched_by: model`), once;
only the consolidator and the operator may ask, and only for active claims of fact of the same
speaker in the same scope, said before."""

from __future__ import annotations

from typing import Any

import pytest

from tavern_runtime import principals
from tests.integration.ledger.conftest import LedgerBus
from tests.support import auth, signed_user
from tests.unit.ledger.builders import at, session_created, user_message

pytestmark = pytest.mark.integration

CONSOLIDATOR = principals.service("consolidator")


async def _sister(ledger: LedgerBus) -> tuple[dict[str, Any], dict[str, Any]]:
    events = (
        session_created("s1", chat_id="chat-a", character_id="mira"),
        user_message("s1", 2, "My sister lives in Porto"),
        session_created("s2", chat_id="chat-a", character_id="mira"),
        user_message("s2", 30, "My sister lives in Lisbon"),
    )
    last = 0
    for event in events:
        last = await ledger.publish(event)
    await ledger.ingested_through(last)
    [old] = await ledger.evidence(claims=True, session_id="s1")
    [new] = await ledger.evidence(claims=True, session_id="s2")
    return old, new


async def _judge(ledger: LedgerBus, headers: Any, new: str, *old: str) -> dict[str, Any]:
    return await ledger.rpc(
        "claim.supersede",
        headers=headers,
        actor="consolidator",
        evidence_id=new,
        supersedes=list(old),
        decision="update",
    )


async def test_the_consolidators_judgement_supersedes_the_old_claim_with_lineage_once(
    ledger: LedgerBus,
) -> None:
    old, new = await _sister(ledger)
    assert old["state"] == "active"  # no correction wording: the rules leave it

    reply = await _judge(ledger, auth(CONSOLIDATOR), new["id"], old["id"])
    assert (reply["superseded"], reply["unchanged"]) == ([old["id"]], [])
    [old_after] = await ledger.evidence(claims=True, session_id="s1")
    [new_after] = await ledger.evidence(claims=True, session_id="s2")
    assert (old_after["state"], old_after["valid_until"]) == ("superseded", at(30))
    assert (new_after["state"], list(new_after["supersedes"])) == ("active", [old["id"]])
    [supersede] = (await ledger.rpc("audit", op="supersede"))["items"]
    assert (supersede["target_id"], supersede["actor"]) == (old["id"], "consolidator")
    [correct] = (await ledger.rpc("audit", op="correct"))["items"]
    assert correct["target_id"] == new["id"]
    assert (correct["payload"]["matched_by"], correct["payload"]["decision"]) == ("model", "update")
    assert correct["payload"]["corrects"] == [old["id"]]

    again = await _judge(ledger, auth(CONSOLIDATOR), new["id"], old["id"])
    assert (again["superseded"], again["unchanged"]) == ([], [old["id"]])
    assert len((await ledger.rpc("audit", op="supersede"))["items"]) == 1
    assert len((await ledger.rpc("audit", op="correct"))["items"]) == 1

    recalled = await ledger.rpc("recall", session_id="s2", query="where does my sister live?")
    assert "Lisbon" in recalled["text"]
    assert "Porto" not in recalled["text"]


async def test_a_user_may_not_ask_for_a_judgement_and_the_refusal_is_audited(
    ledger: LedgerBus,
) -> None:
    old, new = await _sister(ledger)
    reply = await _judge(ledger, signed_user("alice"), new["id"], old["id"])
    assert reply["error"]["code"] == "forbidden"
    [refused] = (await ledger.rpc("audit", op="access_refused"))["items"]
    assert refused["payload"]["rpc"] == "claim.supersede"
    [old_after] = await ledger.evidence(claims=True, session_id="s1")
    assert old_after["state"] == "active"


async def test_a_judgement_cannot_end_a_later_claim_or_a_message_or_an_unknown_row(
    ledger: LedgerBus,
) -> None:
    old, new = await _sister(ledger)
    [message] = await ledger.evidence(session_id="s1")
    for new_id, target in ((old["id"], new["id"]), (new["id"], message["id"]), (new["id"], "nope")):
        reply = await _judge(ledger, auth(CONSOLIDATOR), new_id, target)
        assert reply["error"]["code"] == "conflict", reply
    rows = await ledger.evidence(claims=True, session_id="s1")
    assert [r["state"] for r in rows] == ["active"]
    assert (await ledger.rpc("audit", op="supersede"))["items"] == []
