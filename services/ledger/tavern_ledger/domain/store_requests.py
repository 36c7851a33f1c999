"""The shapes of store RPC requests (the contract's, `tavern_events.rpc.stores`): strict
(unknown fields are refused), parsed from JSON.

Every request names its session (the caller's context, set by the loop); the scope ids come
from that session's binding. `scope_id`, `chat_id` and `character_id` are accepted only to be
checked: naming another session's scope is refused and audited.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tavern_events.rpc.stores import (
    Count,
    MemoryForget,
    MemoryRead,
    MemorySearch,
    MemoryUpdate,
    MemoryWrite,
    Revision,
    Score,
    StoreRequest,
    VariableChange,
    VariableDelete,
    VariableGet,
    VariableList,
    VariablePatch,
    VariableSet,
)
from tavern_ledger.toolcalls.errors import Invalid, Malformed, TooLarge

__all__ = [
    "Count",
    "MemoryForget",
    "MemoryRead",
    "MemorySearch",
    "MemoryUpdate",
    "MemoryWrite",
    "Revision",
    "Score",
    "StoreRequest",
    "VariableChange",
    "VariableDelete",
    "VariableGet",
    "VariableList",
    "VariablePatch",
    "VariableSet",
    "load_json",
    "parse",
    "summary",
]

R = TypeVar("R", bound=StoreRequest)


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
