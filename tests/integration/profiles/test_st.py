"""The st profile on a running loop and projector: assembly, swipe, regenerate, chat JSONL."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tavern_events.envelope import SessionEvent
from tests.integration.loop.checks import RecordingProvider, of_type, recording_router
from tests.integration.profiles.conftest import check_rebuilt, command, ended, requests
from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import import_fixture

pytestmark = pytest.mark.integration

ASKED = "Is the keeper in? The storm is coming."


async def st_session(projector: Projector, model: RecordingProvider) -> list[SessionEvent]:
    character = await import_fixture(projector, "v2_mira.png")
    await projector.caught_up("assets")
    await projector.bus.engine(router=recording_router(model))
    await command(projector.bus, "st1", "create", architecture="st", character_id=character)
    await projector.bus.say("st1", ASKED)
    return await projector.bus.turns_ended("st1", 2)


async def chat_lines(projector: Projector) -> list[dict[str, Any]]:
    await projector.caught_up("chat")
    row = await projector.chat_row("st1")
    lines = projector.chat_file(row["chat_key"]).read_text().splitlines()
    return [json.loads(line) for line in lines[1:]]


async def test_st_assembles_sillytaverns_prompt_without_tools(projector: Projector) -> None:
    model = RecordingProvider()
    events = await st_session(projector, model)
    (request,) = requests(events)
    assert request.payload.tool_names == ()
    assert request.payload.params["profile"] == "st"
    system = request.payload.params["system"]
    sections = system.split("\n\n")
    assert sections[0] == "Write Mira's next reply in a fictional chat between Mira and User."
    assert sections.index("Mira is the keeper's apprentice at Cael Point.") < sections.index(
        "[Mira's personality: patient, curious, wry]"
    )
    assert "[Circumstances and context of the dialogue: A storm night. User knocks" in system
    assert "[Example Chat]\nUser: Who are you?\nMira: Mira. Mind the steps." in sections
    assert "Old Tamsin keeps the light and distrusts strangers." in sections, "keyword activated"
    assert "The Cael Point lighthouse has 214 steps" not in system, "its keys were not said"
    assert sections[-1] == "[Start a new Chat]"
    assert model.chat()[0][1:] == [
        {"role": "assistant", "content": "The door creaks open."},
        {"role": "user", "content": ASKED},
    ], "the chat opens with the card's greeting"
    check_rebuilt(events, model.chat())


async def test_swipe_and_regenerate_keep_sillytaverns_chat_semantics(projector: Projector) -> None:
    model = RecordingProvider()
    await st_session(projector, model)
    await command(projector.bus, "st1", "swipe")
    events = await projector.bus.turns_ended("st1", 3)
    swipe_turn = [e for e in events if e.turn == 3]
    assert of_type(swipe_turn, "user/message") == []
    (swiped,) = of_type(swipe_turn, "assistant/message")
    assert swiped.form == "swipe"
    assert ended(events, 3).payload.reason == "swipe"
    assert model.chat()[1] == model.chat()[0], "the same question, asked again"
    lines = await chat_lines(projector)
    assert len(lines) == 3, "greeting, question, reply"
    reply = lines[2]
    assert (reply["swipe_id"], len(reply["swipes"]), reply["mes"]) == (1, 2, swiped.payload.content)
    seqs = [info["extra"]["agentTavern"]["eventSeq"] for info in reply["swipe_info"]]
    assert seqs[1] == swiped.seq
    assert seqs[0] < seqs[1]

    await command(projector.bus, "st1", "regenerate")
    events = await projector.bus.turns_ended("st1", 4)
    (regenerated,) = of_type([e for e in events if e.turn == 4], "assistant/message")
    assert regenerated.form == "regenerate"
    lines = await chat_lines(projector)
    assert len(lines) == 3
    assert (lines[2]["swipes"], lines[2]["swipe_id"]) == ([regenerated.payload.content], 0)
    check_rebuilt(events, model.chat())


async def test_a_new_chat_opens_with_the_greeting_in_both_architectures(
    projector: Projector,
) -> None:
    character = await import_fixture(projector, "v2_mira.png")
    await projector.caught_up("assets")
    model = RecordingProvider()
    await projector.bus.engine(router=recording_router(model))
    for session_id, architecture in (("g-st", "st"), ("g-at", "agent-tavern")):
        await command(
            projector.bus, session_id, "create", architecture=architecture, character_id=character
        )
        await projector.bus.say(session_id, ASKED)
        events = await projector.bus.turns_ended(session_id, 2)
        (greeting, *_) = of_type(events, "assistant/message")
        assert greeting.form == "greeting"
        assert greeting.turn == 1, "in the turn that created the chat"
        assert greeting.payload.content == "The door creaks open."
        assert greeting.payload.swipes == (
            "The door creaks open.",
            "The lamp flickers as you step in.",
        )
        await projector.caught_up("chat")
        row = await projector.chat_row(session_id)
        first = json.loads(projector.chat_file(row["chat_key"]).read_text().splitlines()[1])
        assert (first["mes"], first["swipe_id"], len(first["swipes"])) == (
            "The door creaks open.",
            0,
            2,
        )
    st_request, agent_request = model.chat()
    assert st_request[1] == {"role": "assistant", "content": "The door creaks open."}
    said = [m for m in agent_request if m["role"] in ("assistant", "user")]
    assert said[0] == {"role": "assistant", "content": "The door creaks open."}
    assert said[-1] == {"role": "user", "content": ASKED}


async def test_swipe_is_refused_where_it_has_no_meaning(projector: Projector) -> None:
    await projector.bus.engine()
    await command(projector.bus, "fresh", "create", architecture="st")
    await command(projector.bus, "fresh", "swipe")
    await projector.bus.say("agent", "hello")
    await projector.bus.turns_ended("agent", 1)
    await command(projector.bus, "agent", "regenerate")
    fresh, agent = (
        await projector.bus.turns_ended("fresh", 2),
        await projector.bus.turns_ended("agent", 2),
    )
    assert "does not end with a reply" in ended(fresh, 2).payload.reason
    assert "is an st command" in ended(agent, 2).payload.reason
    assert ended(agent, 2).payload.outcome == ended(fresh, 2).payload.outcome == "rejected"
