"""A model's judgement of new claims, through the real ledger and a scripted loopback model: a
plain new fact the rules leave alone ("My sister lives in Lisbon", no correction wording) that
the model judges an UPDATE of "My sister lives in Porto" ends the old claim with lineage and a
`matched_by: model` audit; the same conversation with a model answering garbage changes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.integration.consolidator.conftest import Tavern
from tests.integration.consolidator.model_server import ModelServer
from tests.integration.loop.providers.openai_server import Scripted, text_stream
from tests.support import eventually

pytestmark = pytest.mark.integration

JUDGE_PROMPT = "Statements (JSON):"


def judge_requests(tavern: Tavern) -> list[dict[str, Any]]:
    """The judgements asked, as the statements they showed the model."""
    asked = []
    for request in tavern.model.distil_requests:
        user = request.body["messages"][-1]["content"]
        if user.startswith(JUDGE_PROMPT):
            asked.append(json.loads(user.partition("\n")[2]))
    return asked


def updates_the_old_residence(statements: Any) -> Scripted:
    """Judges the new statement an update of the earlier one that names another city."""
    assert isinstance(statements, dict), "only judgements are asked in these tests"
    moved = [e["label"] for e in statements["earlier"] if "lives in" in e["text"]]
    answer = {"decision": "update", "replaces": moved, "reason": "she moved"}
    return text_stream([json.dumps(answer)])


def garbage(_: Any) -> Scripted:
    return text_stream(['UPDATE E1 and also {"decision": "update", "replaces": ["E9"]'])


@pytest.fixture
def consolidator_options() -> dict[str, Any]:
    return {"consolidator_judge_claims": True}


@pytest.fixture
async def model_server(request: pytest.FixtureRequest) -> AsyncIterator[ModelServer]:
    responder = garbage if "garbage" in request.node.name else updates_the_old_residence
    async with ModelServer(responder) as server:
        yield server


@pytest.fixture
def model_url(request: pytest.FixtureRequest) -> str | None:
    return None if "without_a_model" in request.node.name else "model"


async def _conversation(tavern: Tavern) -> None:
    await tavern.session("s1", chat_id="chat-a")
    await tavern.say("s1", "My sister's name is Lena. She lives in Porto.")
    await tavern.session("s2", chat_id="chat-a")
    await tavern.say("s2", "My sister lives in Lisbon", day=1)


async def _claims(tavern: Tavern, session_id: str) -> dict[str, dict[str, Any]]:
    rows = await tavern.db.fetch(
        "SELECT * FROM ledger.evidence WHERE session_id = $1 AND claim_of IS NOT NULL",
        session_id,
    )
    return {str(r["content"]): dict(r) for r in rows}


async def _audit(tavern: Tavern, op: str) -> list[dict[str, Any]]:
    rows = await tavern.db.fetch("SELECT * FROM ledger.audit WHERE op = $1 ORDER BY id", op)
    return [dict(r) for r in rows]


async def test_a_new_fact_the_model_judges_an_update_supersedes_the_old_claim(
    tavern: Tavern,
) -> None:
    await _conversation(tavern)

    async def superseded() -> bool:
        old = (await _claims(tavern, "s1")).get("My sister lives in Porto.")
        return old is not None and old["state"] == "superseded"

    await eventually(superseded, timeout=20)
    before, after = await _claims(tavern, "s1"), await _claims(tavern, "s2")
    old, name = before["My sister lives in Porto."], before["My sister's name is Lena."]
    new = after["My sister lives in Lisbon"]
    assert name["state"] == "active"  # the sister's name stays
    assert old["valid_until"] == new["observed_at"]
    assert (new["state"], list(new["supersedes"])) == ("active", [old["id"]])
    [supersede] = await _audit(tavern, "supersede")
    assert (supersede["target_id"], supersede["actor"]) == (old["id"], "consolidator")
    [correct] = await _audit(tavern, "correct")
    payload = json.loads(correct["payload"])
    assert (correct["target_id"], payload["matched_by"], payload["decision"]) == (
        new["id"],
        "model",
        "update",
    )
    [asked] = judge_requests(tavern)
    assert asked["new"] == "My sister lives in Lisbon"
    assert {e["text"] for e in asked["earlier"]} >= {"My sister lives in Porto."}


async def test_a_model_answering_garbage_changes_nothing(tavern: Tavern) -> None:
    await _conversation(tavern)

    async def judged() -> bool:
        pending = await tavern.db.fetchval(
            "SELECT count(*) FROM consolidator.evidence WHERE judge_pending"
        )
        copies = await tavern.copies("chat-a")
        return bool(judge_requests(tavern)) and copies == 3 and pending == 0

    await eventually(judged, timeout=20)
    await tavern.settled()
    rows = [*(await _claims(tavern, "s1")).values(), *(await _claims(tavern, "s2")).values()]
    assert [r["state"] for r in rows] == ["active"] * 3
    assert all(list(r["supersedes"]) == [] for r in rows)
    assert await _audit(tavern, "supersede") == []


async def test_without_a_model_no_claim_awaits_judgement_and_nothing_changes(
    tavern: Tavern,
) -> None:
    await _conversation(tavern)
    await eventually(lambda: _copied(tavern, 3), timeout=20)
    await tavern.settled()
    pending = await tavern.db.fetchval(
        "SELECT count(*) FROM consolidator.evidence WHERE judge_pending"
    )
    assert (pending, tavern.model.requests) == (0, [])
    rows = [*(await _claims(tavern, "s1")).values(), *(await _claims(tavern, "s2")).values()]
    assert [r["state"] for r in rows] == ["active"] * 3


async def _copied(tavern: Tavern, n: int) -> bool:
    return await tavern.copies("chat-a") == n
