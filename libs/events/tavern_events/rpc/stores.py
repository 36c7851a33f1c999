"""`tavern.rpc.ledger.memory.*` and `tavern.rpc.ledger.variable.*`: the memory and variable
stores the loop's tools call. Requests are strict (unknown fields are refused).

Every request names its session (the caller's context, set by the loop); the scope ids come
from that session's binding. `scope_id`, `chat_id` and `character_id` are accepted only to be
checked: naming another session's scope is refused and audited.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from tavern_events.envelope import Id, UtcDatetime
from tavern_events.rpc.base import RpcReply

MemoryScope = Literal["chat", "character", "agent", "global"]
VariableScope = Literal["turn", "chat", "character", "agent", "global"]
Count = Annotated[int, Field(ge=1, le=1_000_000)]
Score = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Revision = Annotated[int, Field(ge=0)]


class StoreRequest(BaseModel):
    """Fields every store request carries: who is asking, from where."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_id: Id
    turn: int = Field(default=0, ge=0)
    step: int = Field(default=0, ge=0)
    call_id: str | None = Field(default=None, max_length=256)
    agent_id: Id | None = None
    """The acting agent, for provenance; it selects no scope."""
    member: Id | None = None
    """A group chat's speaking member (its character id) when the chat's memory reaches per
    member: set by the loop, never by the model. The session's `character` scope is then that
    member's own (the one its chats with that character share, and recall reads for it)."""
    scope_id: str | None = Field(default=None, max_length=256)
    chat_id: str | None = Field(default=None, max_length=256)
    character_id: str | None = Field(default=None, max_length=256)

    def claims(self) -> dict[str, str | None]:
        return {
            "scope_id": self.scope_id,
            "chat_id": self.chat_id,
            "character_id": self.character_id,
        }

    @property
    def addressed_scope(self) -> str | None:
        scope = getattr(self, "scope", None)
        return scope if isinstance(scope, str) else None


# --- memory requests ----------------------------------------------------------------------------


class MemorySearch(StoreRequest):
    query: str = Field(default="", max_length=2000)
    tags: tuple[str, ...] = Field(default=(), max_length=16)
    scope: MemoryScope | None = None
    since: UtcDatetime | None = None
    until: UtcDatetime | None = None
    limit: Count | None = None
    max_tokens: Count | None = None


class MemoryRead(StoreRequest):
    id: Id


class MemoryWrite(StoreRequest):
    scope: MemoryScope
    kind: Literal["semantic", "episodic"] = "semantic"
    content: str
    tags: tuple[str, ...] = Field(default=(), max_length=64)
    importance: Score = 0.5
    confidence: Score = 1.0
    ttl_s: int | None = Field(default=None, ge=1)
    claim_domain: str = Field(default="experience", pattern=r"^[a-z][a-z0-9_]{0,31}$")
    source_ref: str | None = Field(default=None, max_length=200)


class MemoryUpdate(StoreRequest):
    id: Id
    expected_revision: int = Field(ge=1)
    content: str | None = None
    tags: tuple[str, ...] | None = Field(default=None, max_length=64)
    importance: Score | None = None
    confidence: Score | None = None
    ttl_s: int | None = Field(default=None, ge=0)
    """0 clears the expiry; absent keeps it."""
    claim_domain: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]{0,31}$")
    source_ref: str | None = Field(default=None, max_length=200)


class MemoryForget(StoreRequest):
    id: Id
    expected_revision: int | None = Field(default=None, ge=1)
    reason: str = Field(default="", max_length=200)


# --- variable requests --------------------------------------------------------------------------


class VariableGet(StoreRequest):
    scope: VariableScope
    name: str = Field(max_length=256)


class VariableSet(StoreRequest):
    scope: VariableScope
    name: str = Field(max_length=256)
    value: JsonValue
    expected_revision: Revision = 0
    """The variable's current revision; 0 means it must not exist yet."""


class VariableChange(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(max_length=256)
    value: JsonValue = None
    delete: bool = False
    expected_revision: Revision | None = None

    @model_validator(mode="after")
    def _one_action(self) -> VariableChange:
        has_value = "value" in self.model_fields_set
        if has_value == self.delete:
            raise ValueError("a change either sets a value or deletes (delete: true)")
        return self


class VariablePatch(StoreRequest):
    scope: VariableScope
    changes: tuple[VariableChange, ...] = Field(min_length=1)
    expected_revision: Revision
    """The scope's current revision (0: the scope is still empty)."""


class VariableDelete(StoreRequest):
    scope: VariableScope
    name: str = Field(max_length=256)
    expected_revision: Revision | None = None
    """None deletes whatever revision is current."""


class VariableList(StoreRequest):
    scope: VariableScope
    prefix: str = Field(default="", max_length=64)
    limit: Count | None = None


# --- replies ------------------------------------------------------------------------------------

Timestamp = str | None
"""ISO 8601 UTC, or null."""


class MemoryHit(RpcReply):
    id: str
    scope: MemoryScope
    kind: str
    content: str
    tags: list[str]
    importance: float
    confidence: float
    score: float
    revision: int
    source: dict[str, Any]
    updated_at: Timestamp
    truncated: bool


class MemorySearchReply(RpcReply):
    hits: list[MemoryHit]
    source_count: int
    truncated: bool


class MemoryRecord(RpcReply):
    """A full record; a quarantined one is shown without its content."""

    id: str
    scope: MemoryScope
    kind: str
    content: str | None
    tags: list[str]
    importance: float
    confidence: float
    claim_domain: str
    state: str
    revision: int
    source: dict[str, Any]
    created_at: Timestamp
    updated_at: Timestamp
    expires_at: Timestamp
    gate_reasons: list[str] | None = None


class MemoryReadReply(RpcReply):
    found: bool
    id: str | None = None
    """The id asked for, when nothing was found."""
    memory: MemoryRecord | None = None


class MemoryChangeReply(RpcReply):
    """`memory.write` and `memory.update`: where it went, its revision, the gate's verdict."""

    id: str
    scope: MemoryScope
    state: str
    revision: int
    source: dict[str, Any]
    gate_reasons: list[str]
    searchable: bool


class MemoryForgetReply(RpcReply):
    found: bool
    id: str
    revision: int | None = None
    state: str | None = None


class VariableReply(RpcReply):
    """`variable.get` (`found` false: no such variable) and `variable.set`."""

    scope: VariableScope
    scope_revision: int
    name: str
    found: bool | None = None
    value: JsonValue = None
    type: str | None = None
    revision: int | None = None
    updated_at: Timestamp = None


class VariableWritten(RpcReply):
    name: str
    type: str
    revision: int


class VariablePatchReply(RpcReply):
    scope: VariableScope
    scope_revision: int
    variables: list[VariableWritten]
    deleted: list[str]


class VariableDeleteReply(RpcReply):
    found: bool
    scope: VariableScope
    name: str
    scope_revision: int


class VariableListed(RpcReply):
    name: str
    type: str
    revision: int
    bytes: int
    summary: str


class VariableListReply(RpcReply):
    scope: VariableScope
    scope_revision: int
    variables: list[VariableListed]
    source_count: int
    truncated: bool
