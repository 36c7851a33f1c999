"""`tavern.rpc.projector.*`: the read-only queries behind the `tavern_*` tools and the
projector's status. Numbers out of range are clamped to the hard caps rather than refused: a
model that asks for too much gets the most it may have."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from tavern_events.rpc.base import RpcReply, RpcRequest
from tavern_events.subjects import ID_PATTERN

FIELD_CHARS_MAX = 65_536
"""Whole card fields fit: a big answer is bounded by the loop's spill, not cut here first."""
HISTORY_LIMIT_MAX = 100
HISTORY_TOKENS_MAX = 32_000
HISTORY_EXCERPT_CHARS_MAX = 20_000
"""Caps of one history search: large enough that a big result reaches the loop's spill (a bounded
preview and a locator the model pages through with `spill_read`), not cut here first."""
LORE_TOKENS_MAX = 32_000
LORE_LIMIT_MAX = 100
MAX_RECURSION_STEPS = 10


def clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


# --- requests -----------------------------------------------------------------------------------


class HistoryRequest(RpcRequest):
    """`history.search`: messages holding every query word, in the chat and its parents."""

    session_id: str = Field(pattern=ID_PATTERN)
    query: str = Field(min_length=1, max_length=2000)
    limit: int = 10
    max_tokens: int = 1200
    parents: bool = True
    excerpt_chars: int = 400
    """How much of each message a hit shows (the whole message when it is shorter)."""

    @field_validator("limit")
    @classmethod
    def _limit(cls, value: int) -> int:
        return clamp(value, 1, HISTORY_LIMIT_MAX)

    @field_validator("excerpt_chars")
    @classmethod
    def _excerpt(cls, value: int) -> int:
        return clamp(value, 1, HISTORY_EXCERPT_CHARS_MAX)

    @field_validator("max_tokens")
    @classmethod
    def _budget(cls, value: int) -> int:
        return clamp(value, 1, HISTORY_TOKENS_MAX)


class CharacterRequest(RpcRequest):
    """`character.get`: fields of the session's character (or persona)."""

    session_id: str | None = Field(default=None, pattern=ID_PATTERN)
    character: str | None = Field(default=None, max_length=200)
    kind: Literal["character", "persona"] = "character"
    fields: tuple[str, ...] = ("name", "description", "personality", "scenario")
    max_chars: int = 2000

    @field_validator("max_chars")
    @classmethod
    def _cap(cls, value: int) -> int:
        return clamp(value, 1, FIELD_CHARS_MAX)


class Said(RpcRequest):
    name: str = Field(default="", max_length=200)
    text: str = Field(max_length=20000)


class PastActivation(RpcRequest):
    at: int = Field(ge=0)
    """The chat's message count when they activated."""
    ids: tuple[str, ...] = Field(default=(), max_length=200)


class LoreRequest(RpcRequest):
    """`lore.search`: keyword activation over recent messages."""

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


class SceneRequest(RpcRequest):
    """`scene.get`: the session's scene (character, user, scenario, activity)."""

    session_id: str = Field(pattern=ID_PATTERN)
    max_chars: int = 1200

    @field_validator("max_chars")
    @classmethod
    def _cap(cls, value: int) -> int:
        return clamp(value, 1, FIELD_CHARS_MAX)


class SessionsRequest(RpcRequest):
    """`sessions.list`: the asker's most recently active sessions (every owner's for the
    operator)."""

    limit: int = 50

    @field_validator("limit")
    @classmethod
    def _limit(cls, value: int) -> int:
        return clamp(value, 1, 500)


class StatusRequest(RpcRequest):
    """`status` reads no body."""


class ReplayStartRequest(RpcRequest):
    """`replay.start`: rebuild one projection (of one session, or all) in the background,
    from the streams or from the projector's archive."""

    projection: str = Field(min_length=1, max_length=32)
    session_id: str | None = Field(default=None, pattern=ID_PATTERN)
    from_archive: bool = False


class ReplayStatusRequest(RpcRequest):
    """`replay.status`: how far a replay job has got."""

    job_id: str = Field(min_length=1, max_length=64)


# --- replies ------------------------------------------------------------------------------------


class Source(RpcReply):
    kind: str
    id: str
    hash: str | None = None


class HistoryHit(RpcReply):
    chat: str
    session_id: str
    seq: int
    message_id: str | None
    name: str
    isUser: bool
    date: str
    excerpt: str
    source: Source
    truncated: bool


class HistoryReply(RpcReply):
    hits: list[HistoryHit]
    sourceCount: int
    truncated: bool
    capped: bool


class CharacterReply(RpcReply):
    kind: Literal["character", "persona"]
    name: str
    fields: dict[str, Any]
    truncated: bool
    avatar: str | None
    source: Source


class LoreEntry(RpcReply):
    id: str
    book: str
    uid: Any
    comment: Any
    content: str
    position: Any
    order: Any
    depth: Any
    role: Any
    reason: str
    tokens: int
    truncated: bool


class LoreReply(RpcReply):
    entries: list[LoreEntry]
    usedTokens: int
    budget: int
    dropped: dict[str, Any]
    sourceCount: int
    truncated: bool
    seed: int


class SceneReply(RpcReply):
    session_id: str
    character: str | None
    user: str | None
    chat: str | None
    chatId: str | None
    architecture: str | None
    contextMode: str | None
    scenario: str
    messageCount: int
    turns: int | None
    lastActivity: str | None
    needsRepair: bool
    group: Any = None
    source: Source
    truncated: bool


class SessionRow(RpcReply):
    session_id: str
    architecture: str | None = None
    context_mode: str | None = None
    chat_id: str | None = None
    character_id: str | None = None
    parent_session_id: str | None = None
    turns: int | None = None
    owner: str | None = None
    created_at: str | None = None
    last_activity: str | None = None
    last_seq: int | None = None
    needs_repair: bool


class SessionsReply(RpcReply):
    sessions: list[SessionRow]


class ProjectionStatus(RpcReply):
    projection: str
    consumer: str
    version: int | str
    stored_version: int | str | None
    checkpoint: int
    applied: int
    gaps_filled: int
    pending: int | None
    ack_pending: int | None


class StatusReply(RpcReply):
    projections: list[ProjectionStatus]


class ReplayReply(RpcReply):
    """A replay job: `state` is running, done, failed (with `failure`) or stalled (its replica
    stopped writing progress); `done` of `total` entries read so far."""

    job_id: str
    projection: str
    session_id: str | None
    from_archive: bool
    state: Literal["running", "done", "failed", "stalled"]
    total: int
    done: int
    entries: int
    failure: str | None
    started_at: str
    updated_at: str
