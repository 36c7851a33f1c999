"""The RPC requests of the projector (the read-only `tavern_*` tools), with their caps.

Numbers out of range are clamped to the hard caps rather than refused: a model that asks for
too much gets the most it may have.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tavern_events.subjects import ID_PATTERN


def clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


class Request(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


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
FIELD_CHARS_MAX = 65_536
TOTAL_CHARS_MAX = 262_144
"""Whole card fields fit: a big answer is bounded by the loop's spill, not cut here first."""
LORE_TOKENS_MAX = 32_000
LORE_LIMIT_MAX = 100


class CharacterRequest(Request):
    """`tavern.rpc.projector.character.get`: fields of the session's character (or persona)."""

    session_id: str | None = Field(default=None, pattern=ID_PATTERN)
    character: str | None = Field(default=None, max_length=200)
    kind: Literal["character", "persona"] = "character"
    fields: tuple[str, ...] = ("name", "description", "personality", "scenario")
    max_chars: int = 2000

    @field_validator("max_chars")
    @classmethod
    def _cap(cls, value: int) -> int:
        return clamp(value, 1, FIELD_CHARS_MAX)


class Said(Request):
    name: str = Field(default="", max_length=200)
    text: str = Field(max_length=20000)


MAX_RECURSION_STEPS = 10


class PastActivation(Request):
    at: int = Field(ge=0)
    """The chat's message count when they activated."""
    ids: tuple[str, ...] = Field(default=(), max_length=200)


class LoreRequest(Request):
    """`tavern.rpc.projector.lore.search`: keyword activation over recent messages."""

    session_id: str | None = Field(default=None, pattern=ID_PATTERN)
    query: str = Field(default="", max_length=2000)
    messages: tuple[Said, ...] | None = None
    """Scan these (oldest first) instead of the session's latest chat messages."""
    books: tuple[str, ...] = ()
    scan_depth: int = 2
    max_tokens: int = 1000
    limit: int = 20
    seed: int | None = None
    case_sensitive: bool = False
    match_whole_words: bool = False
    recursive: bool = True
    """Activated entries' content activates others (SillyTavern's default)."""
    max_recursion_steps: int = 0
    truncate: bool = False
    """An entry over the remaining budget comes back cut and marked, not dropped."""
    message_count: int | None = Field(default=None, ge=0)
    """The chat's length, for `delay` and the timed effects (default: the messages scanned)."""
    activations: tuple[PastActivation, ...] = Field(default=(), max_length=2000)
    """The chat's earlier activations, oldest first (sticky and cooldown follow from them)."""

    @field_validator("max_recursion_steps")
    @classmethod
    def _steps(cls, value: int) -> int:
        return clamp(value, 0, MAX_RECURSION_STEPS)

    @field_validator("scan_depth")
    @classmethod
    def _depth(cls, value: int) -> int:
        return clamp(value, 0, 100)

    @field_validator("max_tokens")
    @classmethod
    def _budget(cls, value: int) -> int:
        return clamp(value, 1, LORE_TOKENS_MAX)

    @field_validator("limit")
    @classmethod
    def _limit(cls, value: int) -> int:
        return clamp(value, 1, LORE_LIMIT_MAX)


class SceneRequest(Request):
    session_id: str = Field(pattern=ID_PATTERN)
    max_chars: int = 1200

    @field_validator("max_chars")
    @classmethod
    def _cap(cls, value: int) -> int:
        return clamp(value, 1, FIELD_CHARS_MAX)


class SessionsRequest(Request):
    limit: int = 50

    @field_validator("limit")
    @classmethod
    def _limit(cls, value: int) -> int:
        return clamp(value, 1, 500)


def bounded(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to `limit` characters (with `…`), and whether it was cut."""
    if len(text) <= limit:
        return text, False
    return text[: max(0, limit - 1)] + "…", True
