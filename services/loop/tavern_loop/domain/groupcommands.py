"""Group chat commands (pure): `/member` (add, remove, mute, unmute) and `/group` (settings).

Commands run at an idle turn boundary, so a membership change applies from the next turn.
Each function returns the event to record, or a `Refusal` saying why not.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tavern_events.envelope import Id
from tavern_events.group import (
    Activation,
    GroupBinding,
    GroupMember,
    MemberAdded,
    MemberAddedPayload,
    MemberMuted,
    MemberPayload,
    MemberRemoved,
    MemberUnmuted,
)
from tavern_events.session import SessionBindingChangedPayload
from tavern_loop.domain.binding import Refusal, _Args, parse_args
from tavern_loop.domain.state import Binding

NOT_A_GROUP = "this session is not a group chat (create it with a group binding)"

MemberEvent = type[MemberAdded] | type[MemberRemoved] | type[MemberMuted] | type[MemberUnmuted]


class MemberArgs(_Args):
    action: Literal["add", "remove", "mute", "unmute"]
    character_id: Id
    talkativeness: float = Field(default=0.5, ge=0.0, le=1.0)
    reason: str | None = Field(default=None, max_length=500)


class GroupArgs(_Args):
    activation: Activation | None = None
    allow_self_responses: bool | None = None
    model_chooses: bool | None = None
    auto_mode: bool | None = None
    auto_delay_seconds: float | None = Field(default=None, ge=0.0, le=3600.0)
    auto_bound: int | None = Field(default=None, ge=0, le=100)
    reach: Literal["member", "group"] | None = None


def member_change(
    binding: Binding, args: dict[str, Any]
) -> tuple[MemberEvent, MemberAddedPayload | MemberPayload] | Refusal:
    group = binding.group
    if group is None:
        return Refusal(f"/member: {NOT_A_GROUP}")
    parsed = parse_args(MemberArgs, "member", args)
    if isinstance(parsed, Refusal):
        return parsed
    cid, known = parsed.character_id, group.member_ids()
    if parsed.action == "add":
        if cid in known:
            return Refusal(f"/member: {cid} is already in the group")
        member = GroupMember(character_id=cid, talkativeness=parsed.talkativeness)
        return MemberAdded, MemberAddedPayload(member=member)
    if cid not in known:
        return Refusal(f"/member: {cid} is not in the group (members: {', '.join(known)})")
    payload = MemberPayload(character_id=cid, reason=parsed.reason)
    if parsed.action == "remove":
        if len(known) == 1:
            return Refusal("/member: the last member cannot leave the group")
        return MemberRemoved, payload
    if parsed.action == "mute":
        if cid in group.disabled:
            return Refusal(f"/member: {cid} is already muted")
        return MemberMuted, payload
    if cid not in group.disabled:
        return Refusal(f"/member: {cid} is not muted")
    return MemberUnmuted, payload


def group_change(binding: Binding, args: dict[str, Any]) -> SessionBindingChangedPayload | Refusal:
    group = binding.group
    if group is None:
        return Refusal(f"/group: {NOT_A_GROUP}")
    parsed = parse_args(GroupArgs, "group", args)
    if isinstance(parsed, Refusal):
        return parsed
    changes = parsed.model_dump(exclude_none=True)
    if not changes:
        return Refusal("/group: give a setting to change")
    changed = GroupBinding.model_validate({**group.model_dump(), **changes})
    if changed == group:
        return Refusal("/group: nothing changes")
    return SessionBindingChangedPayload(
        from_architecture=binding.architecture,
        from_context_mode=binding.context_mode,
        to_architecture=binding.architecture,
        to_context_mode=binding.context_mode,
        group=changed,
        reason="group settings changed",
    )
