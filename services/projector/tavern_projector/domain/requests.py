"""The RPC requests of the projector (the read-only `tavern_*` tools): the contract's
(`tavern_events.rpc.projector`), with the caps of their replies.

Numbers out of range are clamped to the hard caps rather than refused: a model that asks for
too much gets the most it may have.
"""

from __future__ import annotations

from tavern_events.rpc.base import RpcRequest as Request
from tavern_events.rpc.projector import (
    FIELD_CHARS_MAX,
    MAX_RECURSION_STEPS,
    CharacterRequest,
    LoreRequest,
    PastActivation,
    Said,
    SceneRequest,
    SessionsRequest,
    clamp,
)

__all__ = [
    "CHARACTER_FIELDS",
    "FIELD_CHARS_MAX",
    "MAX_RECURSION_STEPS",
    "PERSONA_FIELDS",
    "TOTAL_CHARS_MAX",
    "CharacterRequest",
    "LoreRequest",
    "PastActivation",
    "Request",
    "Said",
    "SceneRequest",
    "SessionsRequest",
    "bounded",
    "clamp",
]

CHARACTER_FIELDS = (
    "name",
    "nickname",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "alternate_greetings",
    "group_only_greetings",
    "system_prompt",
    "post_history_instructions",
    "tags",
    "creator",
    "character_version",
    "identity_summary",
)
PERSONA_FIELDS = ("name", "description", "title")
TOTAL_CHARS_MAX = 262_144
"""Whole card fields fit: a big answer is bounded by the loop's spill, not cut here first."""


def bounded(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to `limit` characters (with `…`), and whether it was cut."""
    if len(text) <= limit:
        return text, False
    return text[: max(0, limit - 1)] + "…", True
