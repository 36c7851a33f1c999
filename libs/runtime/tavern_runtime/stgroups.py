"""SillyTavern group definitions (`groups/<id>.json`) as group bindings (pure).

SillyTavern names members by card file (`default_Mira.png`), lists muted ones in
`disabled_members`, numbers its activation strategies (0 natural, 1 list, 2 manual, 3 pooled)
and lists the group's chats (`group chats/<chat id>.jsonl`) in `chats`. A definition that
AgentTavern exported also carries, under `agentTavern`, what SillyTavern has no field for
(talkativeness per member, auto mode and its bound, the model choosing, memory reach).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from pydantic import ValidationError

from tavern_events.group import Activation, GroupBinding, GroupMember, Speaker

ACTIVATIONS: dict[int, Activation] = {0: "natural", 1: "list", 2: "manual", 3: "pooled"}
MAX_TALKATIVENESS_DEFAULT = 0.5
PROVENANCE = "agentTavern"
SETTINGS = {
    "auto_mode": "autoMode",
    "auto_bound": "autoBound",
    "model_chooses": "modelChooses",
    "reach": "reach",
}
"""Group settings SillyTavern has no field for, as an export writes them under `agentTavern`."""


@dataclass(frozen=True)
class Card:
    """An imported card: its asset id, name and talkativeness (from the card)."""

    asset_id: str
    name: str
    talkativeness: float = MAX_TALKATIVENESS_DEFAULT


@dataclass(frozen=True)
class Group:
    binding: GroupBinding
    cast: tuple[Speaker, ...]
    chats: tuple[str, ...]


class GroupRefused(ValueError):
    """The definition cannot become a group binding (the reason says why)."""


def chats_of(definition: Any) -> tuple[str, ...]:
    """The chat ids a definition lists (`chats`, else its `chat_id`, else its id)."""
    if not isinstance(definition, dict):
        return ()
    chats = definition.get("chats")
    if isinstance(chats, list):
        return tuple(str(c) for c in chats if isinstance(c, str | int))
    found = definition.get("chat_id") or definition.get("id")
    return (str(found),) if isinstance(found, str | int) else ()


def group_of(definition: Any, cards: Mapping[str, Card]) -> Group:
    """The group binding of a definition; `cards` maps card file stems to imported cards."""
    if not isinstance(definition, dict):
        raise GroupRefused("a group definition is a JSON object")
    members = definition.get("members")
    if not isinstance(members, list) or not members:
        raise GroupRefused("the group has no members")
    stems = [PurePosixPath(str(m)).stem for m in members]
    missing = [m for m, stem in zip(members, stems, strict=True) if stem not in cards]
    if missing:
        raise GroupRefused(f"member cards not imported: {', '.join(map(str, missing))}")
    disabled_files = definition.get("disabled_members") or []
    disabled = {PurePosixPath(str(m)).stem for m in disabled_files if isinstance(m, str)}
    strategy = definition.get("activation_strategy", 0)
    ids = list(dict.fromkeys(cards[s].asset_id for s in stems))
    by_id = {cards[s].asset_id: (s, cards[s]) for s in stems}
    ours = _ours(definition)
    talk = _talkativeness(ours, by_id)
    try:
        binding = GroupBinding(
            group_id=_group_id(definition),
            name=str(definition.get("name") or "")[:200],
            members=tuple(GroupMember(character_id=cid, talkativeness=talk[cid]) for cid in ids),
            disabled=tuple(cid for cid in ids if by_id[cid][0] in disabled),
            activation=ACTIVATIONS.get(strategy if isinstance(strategy, int) else 0, "natural"),
            allow_self_responses=bool(definition.get("allow_self_responses")),
            auto_delay_seconds=_delay(definition.get("auto_mode_delay")),
            **{k: ours[v] for k, v in SETTINGS.items() if v in ours},
        )
    except ValidationError as exc:
        raise GroupRefused(f"not a usable group: {exc.errors()[0]['msg']}") from None
    cast = tuple(
        Speaker(character_id=cid, name=by_id[cid][1].name[:128], avatar=f"{by_id[cid][0]}.png")
        for cid in ids
    )
    return Group(binding, cast, chats_of(definition))


def _ours(definition: Mapping[str, Any]) -> dict[str, Any]:
    """What an AgentTavern export added to the definition (`agentTavern`), else nothing."""
    found = definition.get(PROVENANCE)
    return found if isinstance(found, dict) else {}


def _talkativeness(
    ours: Mapping[str, Any], by_id: Mapping[str, tuple[str, Card]]
) -> dict[str, float]:
    """Each member's talkativeness: as the group set it (an export's, by card file), else its
    card's."""
    given = ours.get("talkativeness")
    given = given if isinstance(given, dict) else {}
    found = {}
    for cid, (stem, card) in by_id.items():
        value = given.get(f"{stem}.png")
        if isinstance(value, int | float) and 0 <= value <= 1:
            found[cid] = float(value)
        else:
            found[cid] = card.talkativeness
    return found


def speaker_of(line: Mapping[str, Any], cast: tuple[Speaker, ...]) -> Speaker | None:
    """Who spoke a group chat line: by its `original_avatar` (the card file), else its name."""
    avatar = line.get("original_avatar")
    if isinstance(avatar, str):
        stem = PurePosixPath(avatar).stem
        found = next((s for s in cast if s.avatar and PurePosixPath(s.avatar).stem == stem), None)
        if found is not None:
            return found
    name = line.get("name")
    return next((s for s in cast if s.name == name), None)


def _group_id(definition: Mapping[str, Any]) -> str:
    raw = str(definition.get("id") or "group")
    cleaned = "".join(c if c.isalnum() or c in "-_." else "-" for c in raw)[:64]
    return f"g{cleaned}" if not cleaned[:1].isalnum() else cleaned


def _delay(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and 0 <= value <= 3600 else 5.0
