"""Group membership events fold into the binding; old logs read as one-character sessions."""

from __future__ import annotations

from typing import Any

from tavern_events.group import (
    GroupBinding,
    MemberAdded,
    MemberMuted,
    MemberRemoved,
    MemberUnmuted,
    apply_member_event,
)
from tavern_events.message import AssistantMessage
from tavern_events.session import SessionBindingChanged, SessionCreated
from tavern_events.turn import TurnStarted
from tavern_events.union import decode
from tests.unit.events.goldens import golden


def _group() -> GroupBinding:
    event = decode(golden("session/binding-changed"))
    assert isinstance(event, SessionBindingChanged)
    assert event.payload.group is not None
    return event.payload.group


def _member_event(
    event_type: str, **payload: Any
) -> MemberAdded | MemberRemoved | MemberMuted | MemberUnmuted:
    data = golden(event_type)
    event = decode({**data, "payload": {**data["payload"], **payload}})
    assert isinstance(event, MemberAdded | MemberRemoved | MemberMuted | MemberUnmuted)
    return event


def test_logs_from_before_groups_read_as_one_character() -> None:
    created = decode(golden("session/created"))
    started = decode(golden("turn/start"))
    assert isinstance(created, SessionCreated)
    assert created.payload.group is None
    assert isinstance(started, TurnStarted)
    assert started.payload.speakers is None


def test_an_assistant_message_names_its_speaker() -> None:
    message = decode(golden("assistant/message"))
    assert isinstance(message, AssistantMessage)
    assert message.payload.speaker is not None
    assert message.payload.speaker.character_id == message.actor_id == "char_mira"


def test_membership_events_change_the_group() -> None:
    group = _group()
    assert [m.character_id for m in group.enabled()] == ["char_mira", "char_cael"]
    added = _member_event("group/member-added", member={"character_id": "char_ines"})
    assert isinstance(added, MemberAdded)
    group = apply_member_event(group, added)
    group = apply_member_event(group, _member_event("group/member-unmuted"))
    unmute_oren = _member_event("group/member-unmuted", character_id="char_oren")
    group = apply_member_event(group, unmute_oren)
    group = apply_member_event(group, _member_event("group/member-muted"))
    group = apply_member_event(group, _member_event("group/member-removed"))
    assert group.member_ids() == ("char_mira", "char_oren", "char_ines")
    assert [m.character_id for m in group.enabled()] == ["char_oren", "char_ines"]


def test_adding_a_member_twice_or_removing_the_last_changes_nothing() -> None:
    group = _group()
    again = _member_event("group/member-added", member={"character_id": "char_mira"})
    assert apply_member_event(group, again) == group
    alone = group.model_copy(update={"members": group.members[:1], "disabled": ()})
    removed = _member_event("group/member-removed", character_id="char_mira")
    assert apply_member_event(alone, removed) == alone
