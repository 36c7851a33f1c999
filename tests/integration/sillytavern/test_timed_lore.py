"""World info's timed effects in st chats: sticky, cooldown and delay follow the session log,
across turns and for a new runner that reads the log again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_loop.domain.stchat import past_activations, st_chat
from tavern_loop.options import LoopOptions, ProfileOptions, StOptions
from tavern_runtime.cards import importer
from tests.integration.loop.checks import RecordingProvider, recording_router
from tests.integration.profiles.conftest import check_rebuilt, command, requests, stop
from tests.integration.projector.conftest import Projector

pytestmark = pytest.mark.integration

STORM = "A storm is coming over Cael Point."
BELL = "The harbour bell rings at dawn."
LATE = "The keeper trusts you now."


async def lore_session(projector: Projector, tmp_path: Path) -> str:
    world = {
        "entries": {
            "0": {"uid": 0, "key": ["storm"], "content": STORM, "sticky": 2},
            "1": {"uid": 1, "key": ["bell"], "content": BELL, "cooldown": 4},
            "2": {"uid": 2, "key": ["keeper"], "content": LATE, "delay": 6},
        }
    }
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Tamsin",
            "description": "The lighthouse keeper.",
            "personality": "",
            "scenario": "",
            "first_mes": "Who goes there?",
            "mes_example": "",
            "extensions": {"world": "Timed"},
        },
    }
    (tmp_path / "Timed.json").write_text(json.dumps(world))
    (tmp_path / "Tamsin.json").write_text(json.dumps(card))
    data_dir = projector.settings.data_dir
    await importer.import_file(projector.bus.js, tmp_path / "Timed.json", data_dir, "lorebook")
    found = await importer.import_file(projector.bus.js, tmp_path / "Tamsin.json", data_dir)
    await projector.caught_up("assets")
    return found.asset.asset_id


def lore_of(system: str) -> list[str]:
    return [text for text in (STORM, BELL, LATE) if text in system]


async def test_sticky_cooldown_and_delay_across_turns_and_a_new_runner(
    projector: Projector, tmp_path: Path
) -> None:
    character = await lore_session(projector, tmp_path)
    model = RecordingProvider()
    # Scan depth 1 instead of 2: only the newest message is scanned, since the offline model
    # echoes what was said and an echoed key would activate its entry again.
    options = LoopOptions(profiles=ProfileOptions(st=StOptions(scan_depth=1)))
    engine = await projector.bus.engine(options, router=recording_router(model))
    await command(projector.bus, "t1", "create", architecture="st", character_id=character)
    said = [
        "A storm and the bell, keeper?",  # chat length 2: storm, bell; the keeper waits (delay)
        "Quiet now.",  # 4: storm stays (sticky), the bell cools down
        "The bell again, keeper.",  # 6: the bell still cools down; the keeper's delay is over
    ]
    for turn, text in enumerate(said, start=2):
        await projector.bus.say("t1", text)
        await projector.bus.turns_ended("t1", turn)
        await projector.caught_up("history")
    await stop(projector.bus, engine)  # a new runner reads the log again
    await projector.bus.engine(options, router=recording_router(model))
    await projector.bus.say("t1", "Calm, and the bell once more.")  # 8: no storm, the bell back
    events = await projector.bus.turns_ended("t1", 5)

    systems = [r.payload.params["system"] for r in requests(events)]
    assert [lore_of(s) for s in systems] == [
        [STORM, BELL],
        [STORM],
        [LATE],
        [BELL],
    ]
    recorded = [r.payload.params["st"]["lore"] for r in requests(events)]
    assert recorded == [["Timed.0", "Timed.1"], ["Timed.0"], ["Timed.2"], ["Timed.1"]]
    assert past_activations(events, st_chat(events)) == [
        {"at": 2, "ids": ["Timed.0", "Timed.1"]},
        {"at": 4, "ids": ["Timed.0"]},
        {"at": 6, "ids": ["Timed.2"]},
        {"at": 8, "ids": ["Timed.1"]},
    ], "the state the next request reads, from the log alone"
    check_rebuilt(events, model.chat())


async def test_lore_search_returns_an_over_budget_entry_cut_and_marked(
    projector: Projector, tmp_path: Path
) -> None:
    character = await lore_session(projector, tmp_path)
    asked = {"query": "storm", "books": [character], "max_tokens": 4}
    dropped = await projector.rpc("lore.search", asked)
    assert dropped["entries"] == []
    assert dropped["dropped"] == {"Timed.0": "budget"}, "as SillyTavern's world info does"
    cut = await projector.rpc("lore.search", asked | {"truncate": True})
    (found,) = cut["entries"]
    assert found["truncated"] is True
    assert STORM.startswith(found["content"])
    assert len(found["content"]) < len(STORM)
    assert found["tokens"] == 4
