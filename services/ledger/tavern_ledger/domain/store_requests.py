"""The shapes of store RPC requests: strict (unknown fields are refused), parsed from JSON.

Every request names its session (the caller's context, set by the loop); the scope ids come
from that session's binding. `scope_id`, `chat_id` and `character_id` are accepted only to be
checked: naming another session's scope is refused and audited.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, model_validator

from tavern_events.envelope import Id, UtcDatetime
from tavern_ledger.domain.scopes import MemoryScope, VariableScope
from tavern_ledger.toolcalls.errors import Invalid, Malformed, TooLarge

R = TypeVar("R", bound="StoreRequest")

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


# --- memory -------------------------------------------------------------------------------------


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


# --- variables ----------------------------------------------------------------------------------


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


# --- parsing ------------------------------------------------------------------------------------


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def load_json(data: bytes, max_bytes: int) -> dict[str, Any]:
    """The request object, or `TooLarge` / `Malformed`. NaN and Infinity are refused."""
    if len(data) > max_bytes:
        raise TooLarge(f"the request is {len(data)} bytes; the limit is {max_bytes}")
    try:
        raw = json.loads(data or b"{}", parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise Malformed(f"the request is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise Malformed(f"the request must be a JSON object, got {type(raw).__name__}")
    return raw


def parse(model: type[R], raw: dict[str, Any]) -> R:
    """`raw` validated as `model`, or `Invalid` naming the first problems."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise Invalid(f"invalid {_op_name(model)} request: {summary(exc)}") from None


def summary(exc: ValidationError, limit: int = 4) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
        for err in exc.errors()[:limit]
    )


def _op_name(model: type[BaseModel]) -> str:
    name = model.__name__
    for family in ("Memory", "Variable"):
        if name.startswith(family):
            return f"{family.lower()}.{name.removeprefix(family).lower()}"
    return name
