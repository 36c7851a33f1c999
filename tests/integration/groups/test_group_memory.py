"""A group chat's memory on the loop, the ledger and the projector: what is said in the group
is the group chat's; each speaking member also recalls its own memory, labelled as its."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_loop.domain.rebuild import rebuild_request
from tavern_loop.options import ProfileOptions
from tavern_loop.tools.policy import profile_tools
from tests.integration.groups.test_group_turns import cast, create, group
from tests.integration.ledger.stores.conftest import Ledger
from tests.integration.loop.checks import of_type
from tests.integration.profiles.conftest import command
from tests.integration.projector.conftest import Projector
from tests.support import eventually

pytestmark = pytest.mark.integration

FACT = "My sister Ines works as a pediatric nurse in Porto"


async def test_each_member_recalls_its_own_memory_beside_the_group_chats(
    projector: Projector, ledger: Ledger, tmp_path: Path
) -> None:
    ids = await cast(projector, tmp_path)
    await projector.bus.engine()
    await command(projector.bus, "solo", "create", character_id=ids["Mira"])
    await projector.bus.say("solo", FACT)
    await projector.bus.turns_ended("solo", 2)

    await ingested(ledger, "solo", "pediatric nurse")
    await create(projector, "gm", group(ids, ["Mira", "Cael"], activation="list"))
    await projector.bus.say("gm", "The lighthouse bell rang at midnight.")
    await projector.bus.turns_ended("gm", 2)
    await ingested(ledger, "gm", "lighthouse bell")
    await projector.bus.say(
        "gm", "Does anyone know when the lighthouse bell rang, or what Ines does?"
    )
    events = await projector.bus.turns_ended("gm", 3)
    assert events[0].payload.memory_reach == "chat", "the group chat's own memory"
    recalled = {
        e.actor_id: e.payload.text
        for e in of_type(events, "user/message")
        if e.form == "recall" and e.turn == 3
    }
    assert set(recalled) == {ids["Mira"], ids["Cael"]}, "each member's steps recall for it"
    assert "[Mira's own memory]" in recalled[ids["Mira"]]
    assert "pediatric nurse in Porto" in recalled[ids["Mira"]], "from Mira's own chat"
    assert "pediatric nurse" not in recalled[ids["Cael"]], "not Cael's memory"
    for member in ("Mira", "Cael"):
        said, _, own = recalled[ids[member]].partition(f"[{member}'s own memory]")
        assert "[This group chat's memory]" in said
        assert "bell rang at midnight" in said, f"the group chat's memory for {member}"
        assert "bell rang" not in own, "what the group heard is not a member's own memory"

    # Mira's own memory was recalled for her alone: Cael's request does not carry that recall
    # (what Mira then said aloud, Cael heard).
    requests = [e for e in of_type(events, "agent/request") if e.turn == 3]
    shown = {
        e.payload.params["speaker"]: [
            str(m["content"])
            for m in rebuild_request(events, e.seq)
            if m["role"] == "user" and str(m["content"]).startswith("[recall]")
        ]
        for e in requests
    }
    assert set(shown) == {"Mira", "Cael"}
    assert any("[Mira's own memory]" in text for text in shown["Mira"])
    assert shown["Cael"], "Cael's own recall"
    assert not any("[Mira's own memory]" in text for text in shown["Cael"]), "not Mira's"


async def ingested(ledger: Ledger, session_id: str, text: str) -> None:
    async def found() -> bool:
        reply = await ledger.call("query", {"session_id": session_id, "text": text})
        return bool(reply.get("items"))

    await eventually(found, timeout=20)


async def test_a_members_memory_tools_write_to_its_own_scope(
    projector: Projector, ledger: Ledger, tmp_path: Path
) -> None:
    """Reach `member` (the default): what a member stores with its own tools is its own, in
    the character scope its one-to-one chats share, not the group chat's or another member's."""
    ids = await cast(projector, tmp_path)
    await projector.bus.engine(tools=profile_tools(ProfileOptions()))
    await create(projector, "gm", group(ids, ["Mira", "Cael"], activation="manual"))
    note = {"scope": "character", "content": "The lighthouse key hangs by the door"}
    await projector.bus.say("gm", f"call memory_write with {json.dumps(note)}")
    await command(projector.bus, "gm", "speak", name="Cael")
    setting = {"scope": "character", "name": "mood", "value": "watchful"}
    await projector.bus.say("gm", f"call variable_set with {json.dumps(setting)}")
    await command(projector.bus, "gm", "speak", name="Cael")
    events = await projector.bus.turns_ended("gm", 5)
    results = of_type(events, "tool/result")
    assert [r.actor_id for r in results] == [ids["Cael"], ids["Cael"]]
    assert all(r.payload.ok for r in results), [r.payload.content for r in results]

    stored = await ledger.db.fetch("SELECT scope, scope_id, content FROM ledger.memory")
    assert [(r["scope"], r["scope_id"]) for r in stored] == [("character", ids["Cael"])]
    variables = await ledger.db.fetch("SELECT scope, scope_id FROM ledger.variable")
    assert [(r["scope"], r["scope_id"]) for r in variables] == [("character", ids["Cael"])]

    await command(projector.bus, "solo", "create", character_id=ids["Cael"])
    await projector.bus.turns_ended("solo", 1)
    found = await ledger.call("memory.search", {"session_id": "solo", "query": "lighthouse key"})
    assert [h["content"] for h in found["hits"]] == [note["content"]], "Cael's own memory"
    await command(projector.bus, "mira", "create", character_id=ids["Mira"])
    await projector.bus.turns_ended("mira", 1)
    other = await ledger.call("memory.search", {"session_id": "mira", "query": "lighthouse key"})
    assert other["hits"] == [], "not Mira's"
