"""A chat file SillyTavern (or a person) changed is never overwritten by the next turn."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.profiles.conftest import command
from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import import_fixture
from tests.integration.projector.test_cli import tavern

pytestmark = pytest.mark.integration


async def chat_path(projector: Projector, session_id: str) -> Any:
    await projector.caught_up("chat")
    row = await projector.chat_row(session_id)
    return projector.chat_file(row["chat_key"])


def read(path: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def save_as_sillytavern(path: Any, lines: list[dict[str, Any]]) -> None:
    """What SillyTavern's saveChat writes: JSON.stringify lines, no trailing newline."""
    text = "\n".join(json.dumps(x, ensure_ascii=False, separators=(",", ":")) for x in lines)
    path.write_text(text)


async def test_a_chat_changed_outside_keeps_the_change_after_the_next_turn(
    projector: Projector,
) -> None:
    character = await import_fixture(projector, "v2_mira.png")
    await projector.caught_up("assets")
    await projector.bus.engine()
    await command(projector.bus, "e1", "create", architecture="st", character_id=character)
    await projector.bus.say("e1", "Is the keeper in?")
    await projector.bus.turns_ended("e1", 2)
    await command(projector.bus, "e1", "swipe")
    await projector.bus.turns_ended("e1", 3)
    path = await chat_path(projector, "e1")
    lines = read(path)
    header, greeting, asked, reply = lines
    assert reply["swipe_id"] == 1

    # In SillyTavern: the first swipe chosen again, the question edited, an author's note set.
    reply |= {"swipe_id": 0, "mes": reply["swipes"][0]}
    asked["mes"] = "Is the keeper in tonight?"
    header["chat_metadata"] |= {"note_prompt": "Keep it short.", "note_depth": 4}
    save_as_sillytavern(path, [header, greeting, asked, reply])

    await projector.bus.say("e1", "I will wait by the fire.")
    await projector.bus.turns_ended("e1", 4)
    after = read(await chat_path(projector, "e1"))
    assert after[:4] == [header, greeting, asked, reply], "every edit is still there"
    assert [line["mes"] for line in after[4:5]] == ["I will wait by the fire."]
    assert len(after) == 6, "the new turn's two lines follow"
    row = await projector.chat_row("e1")
    assert row["edited_outside_at"] is not None
    assert row["status"] == "ok"

    code, out = await tavern(projector, "sessions")
    assert code == 0
    assert "edited outside, kept" in out


async def test_a_line_deleted_outside_does_not_come_back(projector: Projector) -> None:
    await projector.bus.engine()
    await projector.bus.say("e2", "first")
    await projector.bus.turns_ended("e2", 1)
    path = await chat_path(projector, "e2")
    header, *_ = read(path)
    save_as_sillytavern(path, [header])  # the person deleted both lines in SillyTavern
    await projector.bus.say("e2", "second")
    await projector.bus.turns_ended("e2", 2)
    after = read(await chat_path(projector, "e2"))
    assert [line["mes"] for line in after[1:2]] == ["second"]
    assert len(after) == 3


async def test_a_rebuild_keeps_an_edited_file_aside(projector: Projector) -> None:
    await projector.bus.engine()
    await projector.bus.say("e3", "first")
    await projector.bus.turns_ended("e3", 1)
    path = await chat_path(projector, "e3")
    header, asked, reply = read(path)
    reply["mes"] = "An answer the person rewrote."
    save_as_sillytavern(path, [header, asked, reply])
    await projector.bus.say("e3", "second")
    await projector.bus.turns_ended("e3", 2)
    await projector.caught_up("chat")
    edited = path.read_text()

    code, out = await tavern(projector, "replay", "chat")
    assert code == 0, out
    rebuilt = read(path)
    assert rebuilt[2]["mes"] != "An answer the person rewrote.", "the log's own line"
    (aside,) = list(path.parent.glob("e3 (edited outside *).jsonl"))
    assert aside.read_text() == edited, "the edited file, kept whole beside it"

    code, out = await tavern(projector, "replay", "chat")
    assert code == 0, out
    assert [p.name for p in path.parent.glob("e3 (edited outside *).jsonl")] == [aside.name]
