"""`tavern chat` lines that are commands, group chat ones included; the speaker's name shown."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from tavern_cli.commands.chat import slash_command
from tavern_cli.conversation import Renderer
from tavern_events.group import Speaker
from tavern_events.message import AssistantMessage, AssistantMessagePayload


def test_group_chat_commands_are_parsed() -> None:
    assert slash_command("/speak Cael Voss") == ("speak", {"name": "Cael Voss"})
    assert slash_command("/member mute c_oren") == (
        "member",
        {"action": "mute", "character_id": "c_oren"},
    )
    assert slash_command("/mode agent-managed") == ("mode", {"context_mode": "agent-managed"})
    assert slash_command("/swipe") == ("swipe", {})
    assert slash_command("/speak") is None
    assert slash_command("/member shout c_oren") is None
    assert slash_command("/compact") == ("compact", {})
    assert slash_command("/compact now") is None, "no variant: the help line is shown"


def test_a_group_reply_is_shown_under_its_speakers_name() -> None:
    out = io.StringIO()
    speaker = Speaker(character_id="c_cael", name="Cael")
    reply = AssistantMessage(
        id="e1",
        session_id="s1",
        ts=datetime.now(UTC),
        actor_id="c_cael",
        payload=AssistantMessagePayload(content="The lamp is lit.", speaker=speaker),
    )
    Renderer(out, colour=False).render(reply)
    assert out.getvalue() == "Cael: The lamp is lit.\n"
