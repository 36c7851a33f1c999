"""SillyTavern group definitions as group bindings; who spoke a group chat line."""

from __future__ import annotations

import pytest

from tavern_runtime.stgroups import Card, GroupRefused, chats_of, group_of, speaker_of

CARDS = {"default_Mira": Card("mira-1", "Mira", 0.9), "Tamsin": Card("tamsin-1", "Tamsin", 0.2)}


def test_a_definition_becomes_a_group_binding() -> None:
    definition = {
        "id": "1764625000000",
        "name": "Mira and Tamsin",
        "members": ["default_Mira.png", "Tamsin.png"],
        "disabled_members": ["Tamsin.png"],
        "activation_strategy": 3,
        "allow_self_responses": True,
        "auto_mode_delay": 9,
        "chats": ["2026-12-01@22h00m00s", "2026-12-02@08h00m00s"],
    }
    group = group_of(definition, CARDS)
    binding = group.binding
    assert binding.group_id == "1764625000000"
    assert binding.member_ids() == ("mira-1", "tamsin-1")
    assert [m.talkativeness for m in binding.members] == [0.9, 0.2]
    assert binding.disabled == ("tamsin-1",)
    assert (binding.activation, binding.allow_self_responses) == ("pooled", True)
    assert binding.auto_delay_seconds == 9.0
    assert [s.avatar for s in group.cast] == ["default_Mira.png", "Tamsin.png"]
    assert group.chats == ("2026-12-01@22h00m00s", "2026-12-02@08h00m00s")


def test_a_definition_without_chats_lists_its_chat_id() -> None:
    assert chats_of({"id": "7", "chat_id": "first"}) == ("first",)
    assert chats_of({"id": "7"}) == ("7",)
    assert chats_of([]) == ()


def test_a_group_whose_cards_are_missing_is_refused() -> None:
    with pytest.raises(GroupRefused, match=r"member cards not imported: Oren\.png"):
        group_of({"id": "1", "members": ["default_Mira.png", "Oren.png"]}, CARDS)
    with pytest.raises(GroupRefused, match="no members"):
        group_of({"id": "1", "members": []}, CARDS)


def test_a_line_is_its_speakers_by_card_file_then_by_name() -> None:
    cast = group_of({"id": "1", "members": ["default_Mira.png", "Tamsin.png"]}, CARDS).cast
    by_avatar = speaker_of({"name": "Someone", "original_avatar": "Tamsin.png"}, cast)
    assert by_avatar is not None
    assert by_avatar.character_id == "tamsin-1"
    by_name = speaker_of({"name": "Mira"}, cast)
    assert by_name is not None
    assert by_name.character_id == "mira-1"
    assert speaker_of({"name": "Ren"}, cast) is None


def test_an_exported_definition_gives_back_what_sillytavern_has_no_field_for() -> None:
    definition = {
        "id": "g_cael",
        "members": ["default_Mira.png", "Tamsin.png"],
        "agentTavern": {
            "talkativeness": {"default_Mira.png": 0.3, "Tamsin.png": 2},
            "autoMode": True,
            "autoBound": 7,
            "modelChooses": True,
            "reach": "group",
        },
    }
    binding = group_of(definition, CARDS).binding
    assert [m.talkativeness for m in binding.members] == [0.3, 0.2], "out of range: the card's"
    assert (binding.auto_mode, binding.auto_bound) == (True, 7)
    assert (binding.model_chooses, binding.reach) == (True, "group")
