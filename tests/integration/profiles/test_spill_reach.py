"""Large answers of the agent-tavern tools reach the loop's spill (a bounded preview and a
locator) instead of being cut to the tools' own caps first; `spill_read` opens them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tavern_events.envelope import SessionEvent
from tavern_loop.options import LoopOptions, ProfileOptions
from tavern_loop.tools.policy import profile_tools
from tavern_runtime.cards import importer
from tests.integration.loop.checks import of_type
from tests.integration.loop.tools import numbered_text
from tests.integration.profiles.conftest import command
from tests.integration.projector.conftest import Projector

pytestmark = pytest.mark.integration

CARDS = Path(__file__).resolve().parents[2] / "fixtures" / "cards"
INLINE = LoopOptions().spill_max_inline_bytes or 0
PAGE = 20_000


async def big_card(projector: Projector, tmp_path: Path, chars: int) -> tuple[str, str]:
    card = json.loads((CARDS / "v2_mira.json").read_text())
    description = numbered_text(chars)
    card["data"]["description"] = description
    path = tmp_path / "mira_big.json"
    path.write_text(json.dumps(card))
    published = await importer.import_file(projector.bus.js, path, projector.settings.data_dir)
    await projector.caught_up("assets")
    return published.asset.asset_id, description


def tool_results(events: list[SessionEvent], name: str) -> list[Any]:
    return [e.payload for e in of_type(events, "tool/result") if e.payload.name == name]


async def read_whole(projector: Projector, session: str, turn: int, locator: str, size: int) -> str:
    calls = " ".join(
        f"call spill_read with {json.dumps({'locator': locator, 'offset': at, 'limit': PAGE})}"
        for at in range(0, size, PAGE)
    )
    await projector.bus.say(session, calls)
    events = await projector.bus.turns_ended(session, turn)
    pages = [p for p in tool_results(events, "spill_read") if p.ok]
    assert len(pages) == len(range(0, size, PAGE))
    return "".join(p.content.rsplit("\n\n[spill_read:", 1)[0] for p in pages)


async def test_a_whole_character_field_spills_and_spill_read_returns_it(
    projector: Projector, tmp_path: Path
) -> None:
    bus = projector.bus
    character, description = await big_card(projector, tmp_path, 60_000)
    await bus.engine(tools=profile_tools(ProfileOptions()))
    await command(bus, "b1", "create", character_id=character)
    await bus.turns_ended("b1", 1)
    asked = {"fields": ["description"], "maxChars": 65_536}
    await bus.say("b1", f"call tavern_character_get with {json.dumps(asked)}")
    events = await bus.turns_ended("b1", 2)
    (result,) = tool_results(events, "tavern_character_get")
    assert result.ok
    assert result.spill is not None, "over the inline limit: spilled, not cut"
    assert result.spill.bytes > INLINE
    assert len(result.content.encode()) <= INLINE
    assert result.spill.locator in result.content
    assert result.content.startswith('{"kind": "character"')

    whole = await read_whole(projector, "b1", 3, result.spill.locator, result.spill.bytes)
    answer = json.loads(whole)
    assert answer["fields"]["description"] == description
    assert answer["truncated"] is False


async def test_many_long_history_hits_spill_instead_of_being_cut(projector: Projector) -> None:
    bus = projector.bus
    await bus.engine(tools=profile_tools(ProfileOptions()))
    await command(bus, "h1", "create")
    await bus.turns_ended("h1", 1)
    said = [f"wombat entry {n}: " + numbered_text(18_000) for n in range(4)]
    for turn, text in enumerate(said, start=2):
        await bus.say("h1", text)
        await bus.turns_ended("h1", turn)
    await projector.caught_up("history", "chat")
    asked = {"query": "wombat", "limit": 10, "maxTokens": 32_000, "excerptChars": 20_000}
    await bus.say("h1", f"call tavern_history_search with {json.dumps(asked)}")
    events = await bus.turns_ended("h1", 6)
    (result,) = tool_results(events, "tavern_history_search")
    assert result.ok
    assert result.spill is not None
    assert len(result.content.encode()) <= INLINE

    whole = await read_whole(projector, "h1", 7, result.spill.locator, result.spill.bytes)
    hits = json.loads(whole)["hits"]
    found = {h["excerpt"] for h in hits if not h["truncated"]}
    assert set(said) <= found, "whole messages, as excerptChars asked"
