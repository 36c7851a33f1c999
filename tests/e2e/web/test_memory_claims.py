"""Memory as a person meets it through the web app's API, against the whole stack as processes
with the shipped defaults: a message holding two facts is kept as two claims; a correction in
another chat with the same character ends the one it contradicts and keeps the other; a third
chat recalls the new fact and not the old; the correction is not offered as a rule; a question
is kept as evidence and never recalled as a fact."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.web.test_api import PASSWORD, Client, _events
from tests.reliability.stack import Stack
from tests.support import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CARDS = Path(__file__).resolve().parents[2] / "fixtures" / "cards"
SAID = "Hi! My sister's name is Lena and she lives in Porto."
CORRECTION = "Correction: my sister lives in Lisbon now, not Porto."
QUESTION = "Where does my sister live?"
RULE = "Remember: always greet me with a small bow."


@pytest.fixture(scope="module")
async def person(stack: Stack) -> AsyncIterator[Client]:
    client = await Client(stack.gateway_url).open()
    answer = await client.post("/api/setup", {"name": "vera", "password": PASSWORD})
    assert answer.status_code == 200, answer.text
    yield client
    await client.http.aclose()


async def _character(c: Client) -> str:
    headers = {"X-CSRF-Token": c.http.cookies.get("tavern_csrf") or ""}
    data = (CARDS / "v2_mira.json").read_bytes()
    files = {"file": ("mira.json", data, "application/json")}
    imported = await c.http.post("/api/assets", files=files, headers=headers)
    assert imported.status_code == 200, imported.text
    return str(imported.json()["asset_id"])


async def _chat(c: Client, character: str) -> str:
    answer = await c.post("/api/sessions", {"character_id": character})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["session_id"])


async def _say(c: Client, session_id: str, text: str, turns: int) -> list[dict[str, Any]]:
    """Say `text` and return the session's events up to its `turns`th turn end."""

    async def sent() -> bool:
        r = await c.post(f"/api/sessions/{session_id}/messages", {"text": text})
        return r.status_code == 200

    await eventually(sent, timeout=20, interval=0.3)
    return [event for _, event in await _events(c, session_id, "turn/end", turns)]


def _recall(events: list[dict[str, Any]]) -> str:
    found = [
        e["payload"]["text"]
        for e in events
        if e["type"] == "user/message" and e.get("form") == "recall"
    ]
    return found[-1] if found else ""


async def _memory(c: Client, session_id: str) -> list[dict[str, Any]]:
    """Every row of the character's memory the chat reaches, in any state."""
    scope = await c.get(f"/api/sessions/{session_id}/approvals?target=character")
    assert scope.status_code == 200, scope.text
    scope_id = scope.json()["scope_id"]
    answer = await c.get(f"/api/memory?scope_id={scope_id}&state=all&limit=500")
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


async def test_a_correction_ends_one_claim_of_a_message_and_files_no_rule(person: Client) -> None:
    character = await _character(person)
    first = await _chat(person, character)
    await _say(person, first, SAID, turns=2)  # the creation's turn, then the message's

    async def cut() -> bool:
        kinds = {i["content"]: i.get("claim_kind") for i in await _memory(person, first)}
        return kinds.get("My sister lives in Porto.") == "fact"

    await eventually(cut, timeout=30, interval=0.5)
    items = {i["content"]: i for i in await _memory(person, first)}
    assert items[SAID]["claim_kind"] == "message"
    assert items["My sister's name is Lena"]["claim_kind"] == "fact"
    assert items["Hi!"]["claim_kind"] == "chatter"
    message_id = items[SAID]["evidence_id"]
    assert items["My sister lives in Porto."]["claim_of"] == message_id

    second = await _chat(person, character)
    await _say(person, second, CORRECTION, turns=2)
    await _say(person, second, RULE, turns=3)
    await _say(person, second, QUESTION, turns=4)

    async def ended() -> bool:
        found = {i["content"]: i for i in await _memory(person, second)}
        return found.get("My sister lives in Porto.", {}).get("state") == "superseded"

    await eventually(ended, timeout=30, interval=0.5)
    found = {i["content"]: i for i in await _memory(person, second)}
    assert found["My sister's name is Lena"]["state"] == "active"
    assert found[SAID]["state"] == "active"  # the message is kept whole, as it was said
    correction = found["my sister lives in Lisbon now, not Porto."]
    assert correction["claim_kind"] == "correction"
    assert correction["supersedes"] == [found["My sister lives in Porto."]["evidence_id"]]
    asked = sorted(
        i["claim_kind"] for i in await _memory(person, second) if i["content"] == QUESTION
    )
    assert asked == ["message", "question"]  # kept as evidence, filed as a question

    third = await _chat(person, character)
    recall = _recall(await _say(person, third, QUESTION, turns=2))
    assert "Lisbon" in recall, recall
    assert "My sister lives in Porto" not in recall, recall
    assert "Lena" in recall, recall
    assert QUESTION not in recall, recall  # the earlier chat's question is no memory

    async def drafted() -> list[dict[str, Any]]:
        answer = await person.get(f"/api/sessions/{second}/approvals?target=character")
        assert answer.status_code == 200, answer.text
        return list(answer.json()["rule_drafts"])

    async def the_rule_is_drafted() -> bool:
        return any("small bow" in d.get("text", "") for d in await drafted())

    # The directive said beside it becomes a draft; the correction of a fact never does.
    await eventually(the_rule_is_drafted, timeout=60, interval=1.0)
    assert not [d for d in await drafted() if "Lisbon" in d.get("text", "")]
