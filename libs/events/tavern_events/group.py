"""Group chats: a session with several characters, one speaker chosen for each reply.

The group binding rides in `session/created` and `session/binding-changed`; members are added,
removed, muted and unmuted at a turn boundary by the `group/*` events. The speaking member is
the envelope's `actor_id` on its `assistant/message`, chunks, tool calls and steps, and the
message payload's `speaker` names it for the read models.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tavern_events.envelope import Id, Payload, SessionEvent

Activation = Literal["natural", "list", "pooled", "manual"]
"""How the speakers of a reply are chosen (SillyTavern's activation strategies):
natural: the members named in the last message, then one talkativeness roll each;
list: every member in order; pooled: one of those who have not spoken since the user did;
manual: nobody unless the user asks for a member."""


class GroupMember(Payload):
    character_id: Id
    talkativeness: float = Field(default=0.5, ge=0.0, le=1.0)
    """The chance of speaking when not named (natural strategy), as a card's `talkativeness`."""


class GroupBinding(Payload):
    group_id: Id
    name: str = Field(default="", max_length=200)
    members: tuple[GroupMember, ...] = Field(min_length=1, max_length=64)
    disabled: tuple[Id, ...] = ()
    """Muted members: never chosen, not even when named (an explicit choice still refused)."""
    activation: Activation = "natural"
    allow_self_responses: bool = False
    """Whether the member who spoke last may speak again without the user in between."""
    model_chooses: bool = False
    """agent-tavern: the model may pick the next speaker with `tavern_speaker_choose`."""
    auto_mode: bool = False
    auto_delay_seconds: float = Field(default=5.0, ge=0.0, le=3600.0)
    auto_bound: int = Field(default=3, ge=0, le=100)
    """How many replies members may give each other after one user message in auto mode."""
    reach: Literal["member", "group"] = "member"
    """Whose memory a member recalls: its own across chats (member) or this group chat's."""

    @model_validator(mode="after")
    def _consistent(self) -> GroupBinding:
        ids = [m.character_id for m in self.members]
        if len(set(ids)) != len(ids):
            raise ValueError("a group lists each member once")
        unknown = set(self.disabled) - set(ids)
        if unknown:
            raise ValueError(f"disabled members not in the group: {sorted(unknown)}")
        return self

    def member_ids(self) -> tuple[str, ...]:
        return tuple(m.character_id for m in self.members)

    def enabled(self) -> tuple[GroupMember, ...]:
        return tuple(m for m in self.members if m.character_id not in self.disabled)


class Speaker(Payload):
    """Who spoke an assistant message in a group: the member and how the read models show it."""

    character_id: Id
    name: str = Field(max_length=128)
    avatar: str | None = Field(default=None, max_length=255)
    """The card's file name in SillyTavern's layout (`original_avatar`), when known."""


class MemberAddedPayload(Payload):
    member: GroupMember


class MemberAdded(SessionEvent):
    """A character joined the group (applies from the next turn)."""

    type: Literal["group/member-added"] = "group/member-added"
    payload: MemberAddedPayload


class MemberPayload(Payload):
    character_id: Id
    reason: str | None = Field(default=None, max_length=500)


class MemberRemoved(SessionEvent):
    """A character left the group (applies from the next turn); its lines stay in the log."""

    type: Literal["group/member-removed"] = "group/member-removed"
    payload: MemberPayload


class MemberMuted(SessionEvent):
    """A member is disabled: never chosen to speak until unmuted."""

    type: Literal["group/member-muted"] = "group/member-muted"
    payload: MemberPayload


class MemberUnmuted(SessionEvent):
    """A muted member may speak again."""

    type: Literal["group/member-unmuted"] = "group/member-unmuted"
    payload: MemberPayload


def apply_member_event(
    group: GroupBinding, event: MemberAdded | MemberRemoved | MemberMuted | MemberUnmuted
) -> GroupBinding:
    """The group after one membership event; an event that changes nothing leaves it as is."""
    members, disabled = list(group.members), list(group.disabled)
    if isinstance(event, MemberAdded):
        if event.payload.member.character_id not in group.member_ids():
            members.append(event.payload.member)
    else:
        cid = event.payload.character_id
        if isinstance(event, MemberRemoved) and len(members) > 1:
            members = [m for m in members if m.character_id != cid]
            disabled = [d for d in disabled if d != cid]
        elif isinstance(event, MemberMuted) and cid in group.member_ids() and cid not in disabled:
            disabled.append(cid)
        elif isinstance(event, MemberUnmuted):
            disabled = [d for d in disabled if d != cid]
    return group.model_copy(update={"members": tuple(members), "disabled": tuple(disabled)})
