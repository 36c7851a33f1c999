"""A group's SillyTavern definition from its chats: fields, order, numbers, extras."""

from __future__ import annotations

import json
import re

from tavern_events.group import GroupBinding
from tavern_projector.domain.groupdef import Card, GroupChat, definition, file_id, render

CARDS = {"mira-1": Card("default_Mira.png", "Mira"), "cael-1": Card("Cael.png", "Cael")}


def _group(**changes: object) -> GroupBinding:
    members = [
        {"character_id": "mira-1", "talkativeness": 0.9},
        {"character_id": "cael-1", "talkativeness": 0.4},
        {"character_id": "oren-1"},
    ]
    return GroupBinding.model_validate({"group_id": "g1", "members": members, **changes})


def test_a_definition_is_written_in_sillytaverns_fields_and_order() -> None:
    group = _group(disabled=["cael-1"], activation="pooled", auto_delay_seconds=5)
    first = GroupChat("s_1", _group(), {"note": "old"})
    found = definition(
        [first, GroupChat("s_2", group, {"agentTavern": {"sessionId": "s_2"}})], CARDS
    )
    assert list(found) == [
        "id", "name", "members", "allow_self_responses", "activation_strategy",
        "generation_mode", "disabled_members", "chat_metadata", "fav", "chat_id", "chats",
        "auto_mode_delay", "generation_mode_join_prefix", "generation_mode_join_suffix",
        "past_metadata", "agentTavern",
    ]  # fmt: skip
    assert found["name"] == "Group: Mira, Cael, oren-1", "SillyTavern's name for an unnamed group"
    assert found["members"] == ["default_Mira.png", "Cael.png", "oren-1.png"]
    assert (found["disabled_members"], found["activation_strategy"]) == (["Cael.png"], 3)
    assert (found["chat_id"], found["chats"]) == ("s_2", ["s_1", "s_2"]), "the last is current"
    assert found["chat_metadata"] == {"agentTavern": {"sessionId": "s_2"}}
    assert found["past_metadata"] == {"s_1": {"note": "old"}}
    assert found["agentTavern"]["talkativeness"] == {
        "default_Mira.png": 0.9,
        "Cael.png": 0.4,
        "oren-1.png": 0.5,
    }
    text = render(found).decode()
    assert '\n    "auto_mode_delay": 5,\n' in text, "a whole number as JavaScript prints it"
    assert json.loads(text) == found


def test_each_owner_has_its_own_definition_id_and_the_local_owner_keeps_the_id() -> None:
    from tavern_events.subjects import ID_PATTERN

    assert file_id("1764625000000", "local") == "1764625000000"
    alice, bob = file_id("1764625000000", "alice"), file_id("1764625000000", "bob")
    assert alice != bob
    assert alice.startswith("1764625000000-")
    assert file_id("1764625000000", "alice") == alice, "the same every time (replay)"
    long = file_id("g" * 64, "alice")
    assert len(long) <= 64
    assert re.fullmatch(ID_PATTERN, long)
