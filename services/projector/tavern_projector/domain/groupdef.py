"""A group's SillyTavern definition (`groups/<group id>.json`) from the group chats bound to it
(pure).

The fields and their order are those of SillyTavern's `/api/groups/create`, written as it writes
them (`JSON.stringify(group, null, 4)`): members and muted members by card file, activation
strategy by number (0 natural, 1 list, 2 manual, 3 pooled), the group's chats with the current
one in `chat_id` and its `chat_metadata`, the others' metadata in `past_metadata` (as the front
end keeps it). What SillyTavern has no field for (talkativeness per member, auto mode's bound,
the model choosing, memory reach) rides in `agentTavern`, which SillyTavern keeps when it saves.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tavern_events.group import Activation, GroupBinding
from tavern_events.reach import LOCAL_OWNER

GROUP_CHATS = "group chats"
"""SillyTavern's folder of group chat files, beside `chats/`; a group chat's key starts here."""
GROUPS = "groups"
"""SillyTavern's folder of group definitions, beside `chats/`."""
PROVENANCE = "agentTavern"
STRATEGIES: dict[Activation, int] = {"natural": 0, "list": 1, "manual": 2, "pooled": 3}


OWNER_MARK_CHARS = 10
"""Hex digits of the owner's digest that mark another user's group file."""


def file_id(group_id: str, owner: str) -> str:
    """The id of a group's definition (`groups/<id>.json`, and its `id`) for `owner`'s chats.

    The projected files are one SillyTavern user's folder, while group ids are chosen by each
    user (SillyTavern's are timestamps, and an import keeps them): two users' groups with the
    same id must not share a definition, which would list one user's chats to the other. The
    install's own owner (`local`) keeps the id as it is; another owner's gets a mark derived
    from the owner, so each owner's chats of that group have a definition of their own."""
    if owner == LOCAL_OWNER:
        return group_id
    mark = hashlib.blake2b(owner.encode(), digest_size=OWNER_MARK_CHARS // 2).hexdigest()
    return f"{group_id[: 63 - OWNER_MARK_CHARS]}-{mark}"


@dataclass(frozen=True)
class GroupChat:
    """One chat of a group: its id, its group binding as it stands, its chat metadata."""

    chat_id: str
    group: GroupBinding
    chat_metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Card:
    """A member's card as SillyTavern names it: its file (`original_avatar`) and name."""

    avatar: str
    name: str


def definition(
    chats: Sequence[GroupChat], cards: Mapping[str, Card], group_id: str | None = None
) -> dict[str, Any]:
    """The definition of the group of `chats` (in creation order; the last is the current
    one and gives the settings), under `group_id` (its `file_id`; default the binding's). A
    member without a card is named by its id."""
    current = chats[-1]
    group = current.group

    def card(member: str) -> Card:
        return cards.get(member) or Card(f"{member}.png", member)

    names = ", ".join(card(m).name for m in group.member_ids())
    return {
        "id": group_id or group.group_id,
        "name": group.name or f"Group: {names}",
        "members": [card(m).avatar for m in group.member_ids()],
        "allow_self_responses": group.allow_self_responses,
        "activation_strategy": STRATEGIES[group.activation],
        "generation_mode": 0,
        "disabled_members": [card(m).avatar for m in group.disabled],
        "chat_metadata": current.chat_metadata,
        "fav": False,
        "chat_id": current.chat_id,
        "chats": [c.chat_id for c in chats],
        "auto_mode_delay": _number(group.auto_delay_seconds),
        "generation_mode_join_prefix": "",
        "generation_mode_join_suffix": "",
        "past_metadata": {c.chat_id: c.chat_metadata for c in chats[:-1]},
        PROVENANCE: {
            "talkativeness": {card(m.character_id).avatar: m.talkativeness for m in group.members},
            "autoMode": group.auto_mode,
            "autoBound": group.auto_bound,
            "modelChooses": group.model_chooses,
            "reach": group.reach,
        },
    }


def render(found: Mapping[str, Any]) -> bytes:
    """The file as SillyTavern writes it: `JSON.stringify(group, null, 4)`."""
    return json.dumps(found, indent=4, ensure_ascii=False).encode()


def _number(value: float) -> float | int:
    """A whole number as JavaScript prints it (5, not 5.0)."""
    return int(value) if float(value).is_integer() else value
