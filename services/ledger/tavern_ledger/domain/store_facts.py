"""The LEDGER facts of store changes, with ids derived from what changed (so a retried
publish of the same change is deduplicated by `Nats-Msg-Id`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from tavern_events.ledger import (
    MemoryChanged,
    MemoryChangedPayload,
    VariableChanged,
    VariableChangedPayload,
)
from tavern_ledger.domain.memory import MemoryRecord
from tavern_ledger.domain.scopes import ScopeKey
from tavern_ledger.domain.variables import Plan

_NAMESPACE = uuid.UUID("6f1c2a7e-3b0d-5c49-9e21-7a8b4c0d1e2f")
MemoryOp = Literal["written", "updated", "forgotten"]


@dataclass(frozen=True)
class Origin:
    """Who caused a change: the session and the tool it came through."""

    session_id: str
    actor: str
    ts: datetime


def derived_id(*parts: object) -> str:
    """A UUID (v5) of the parts: the same change always gets the same event id."""
    return str(uuid.uuid5(_NAMESPACE, "|".join(str(p) for p in parts)))


def memory_changed(record: MemoryRecord, op: MemoryOp, origin: Origin) -> MemoryChanged:
    previous = str(record.revision - 1) if record.revision > 1 else None
    payload = MemoryChangedPayload.model_validate(
        {
            "memory_id": record.id,
            "scope": record.scope,
            "op": op,
            "kind": record.kind,
            "content": None if op == "forgotten" else record.content,
            "tags": record.tags,
            "revision": str(record.revision),
            "previous_revision": previous,
            "state": record.state,
        }
    )
    return MemoryChanged(
        id=derived_id("memory", record.id, record.revision),
        scope_id=record.scope_id,
        ts=origin.ts,
        actor=origin.actor,
        session_id=origin.session_id,
        payload=payload,
    )


def variables_changed(key: ScopeKey, plan: Plan, origin: Origin) -> list[VariableChanged]:
    """One fact per variable the plan set or deleted, all at the plan's scope revision."""
    facts = [
        _variable_fact(key, w.name, "set", w.value, plan.revision, w.previous_revision, origin)
        for w in plan.writes
    ]
    facts += [
        _variable_fact(key, r.name, "deleted", None, plan.revision, r.previous_revision, origin)
        for r in plan.removals
    ]
    return facts


def _variable_fact(
    key: ScopeKey,
    name: str,
    op: Literal["set", "deleted"],
    value: Any,
    revision: int,
    previous: int | None,
    origin: Origin,
) -> VariableChanged:
    payload = VariableChangedPayload.model_validate(
        {
            "scope": key.scope,
            "name": name,
            "op": op,
            "value": value,
            "revision": str(revision) if op == "set" else None,
            "previous_revision": str(previous) if previous else None,
        }
    )
    return VariableChanged(
        id=derived_id("variable", key.scope, key.scope_id, key.turn, name, revision),
        scope_id=key.scope_id,
        ts=origin.ts,
        actor=origin.actor,
        session_id=origin.session_id,
        payload=payload,
    )
