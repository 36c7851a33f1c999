"""Variable operations: get, set, patch, delete, list.

Writes lock their scope row, check every revision and cap in the pure rules, then write,
bump the scope revision and queue one `variable/changed` fact per variable in the ledger's
outbox, all in one transaction. Turn-scope writes also hold the session's turn lock, so a turn's
end and a write into that turn never interleave.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tavern_ledger import audit, outbox
from tavern_ledger.domain import variables as rules
from tavern_ledger.domain.facts import outbox_record
from tavern_ledger.domain.scopes import ScopeKey, scope_key
from tavern_ledger.domain.store_facts import Origin, variables_changed
from tavern_ledger.domain.store_limits import clamp
from tavern_ledger.domain.store_requests import (
    StoreRequest,
    VariableDelete,
    VariableGet,
    VariableList,
    VariablePatch,
    VariableSet,
)
from tavern_ledger.domain.store_views import listing_view, variable_view
from tavern_ledger.domain.variables import Change, Plan
from tavern_ledger.scopes import bindings
from tavern_ledger.scopes.bindings import Conn
from tavern_ledger.scopes.tool_calls import authorise
from tavern_ledger.toolcalls.context import StoreContext
from tavern_ledger.toolcalls.errors import Invalid, TooLarge, TurnEnded
from tavern_ledger.variables import rows as variable_store

ScopedRequest = VariableGet | VariableSet | VariablePatch | VariableDelete | VariableList


def tool(op: str) -> str:
    return f"variable_{op}"


def actor(op: str) -> str:
    return f"tool:{tool(op)}"


async def _scope(conn: Conn, ctx: StoreContext, req: ScopedRequest, op: str) -> ScopeKey:
    scopes = await authorise(conn, req, tool(op))
    if req.scope == "turn" and req.turn < 1:
        raise Invalid("turn-scope variables need the caller's turn (>= 1)")
    return scope_key(
        scopes,
        req.scope,
        session_id=req.session_id,
        turn=req.turn,
        global_enabled=ctx.global_enabled,
    )


async def _check_turn_open(conn: Conn, req: StoreRequest, key: ScopeKey) -> None:
    if key.scope != "turn":
        return
    if req.turn <= await bindings.last_ended_turn(conn, req.session_id):
        raise TurnEnded(f"turn {req.turn} has ended: its turn-scope variables are gone")


async def get(ctx: StoreContext, req: VariableGet) -> dict[str, Any]:
    name = rules.validate_name(req.name)
    async with ctx.pool.acquire() as conn:
        key = await _scope(conn, ctx, req, "get")
        await _check_turn_open(conn, req, key)
        found = await variable_store.get(conn, key, name)
        state = await variable_store.scope_state(conn, key)
    head = {"scope": req.scope, "scope_revision": state.revision}
    if found is None:
        return {**head, "found": False, "name": name}
    view = variable_view(found.name, found.value, found.revision, found.updated_at)
    return {**head, "found": True, **view}


async def set_(ctx: StoreContext, req: VariableSet) -> dict[str, Any]:
    change = Change(req.name, req.value, expected=req.expected_revision)
    plan = await _change(ctx, req, [change], None, "set")
    return {
        "scope": req.scope,
        "scope_revision": plan.revision,
        **variable_view(req.name, req.value, plan.revision, ctx.now()),
    }


async def patch(ctx: StoreContext, req: VariablePatch) -> dict[str, Any]:
    if len(req.changes) > ctx.limits.max_patch_changes:
        raise TooLarge(f"a patch may hold at most {ctx.limits.max_patch_changes} changes")
    changes = [Change(c.name, c.value, c.delete, c.expected_revision) for c in req.changes]
    plan = await _change(ctx, req, changes, req.expected_revision, "patch")
    return {
        "scope": req.scope,
        "scope_revision": plan.revision,
        "variables": [
            {"name": w.name, "type": rules.json_type(w.value), "revision": plan.revision}
            for w in plan.writes
        ],
        "deleted": [r.name for r in plan.removals],
    }


async def delete(ctx: StoreContext, req: VariableDelete) -> dict[str, Any]:
    change = Change(req.name, delete=True, expected=req.expected_revision)
    plan = await _change(ctx, req, [change], None, "delete")
    found = bool(plan.removals)
    return {"found": found, "scope": req.scope, "name": req.name, "scope_revision": plan.revision}


async def _change(
    ctx: StoreContext,
    req: VariableSet | VariablePatch | VariableDelete,
    changes: Sequence[Change],
    expected_scope: int | None,
    op: str,
) -> Plan:
    """Check and apply changes to one scope under its lock; the relay publishes the facts."""
    async with ctx.pool.acquire() as conn:
        key = await _scope(conn, ctx, req, op)
        async with conn.transaction():
            if key.scope == "turn":
                await bindings.lock_turns(conn, req.session_id)
                await _check_turn_open(conn, req, key)
            state = await variable_store.lock_scope(conn, key)
            stored = await variable_store.stored(conn, key, [c.name for c in changes])
            plan = rules.plan(
                state, stored, changes, ctx.limits, expected_scope_revision=expected_scope
            )
            if plan.changed:
                await _write(conn, Written(ctx, req, key, plan, op))
    return plan


@dataclass(frozen=True)
class Written:
    """A decided change of one scope, and who asked for it."""

    ctx: StoreContext
    req: StoreRequest
    key: ScopeKey
    plan: Plan
    op: str


async def _write(conn: Conn, w: Written) -> None:
    now = w.ctx.now()
    await variable_store.apply(conn, w.key, w.plan, w.req.session_id, now)
    origin = Origin(w.req.session_id, actor(w.op), now)
    facts = variables_changed(w.key, w.plan, origin)
    await outbox.enqueue(conn, [outbox_record(f) for f in facts])
    for removal in w.plan.removals:
        await audit.append_tool_call(conn, _deleted(w, removal.name))


def _deleted(w: Written, name: str) -> audit.ToolCallEntry:
    return audit.ToolCallEntry(
        session_id=w.req.session_id,
        tool=tool(w.op),
        op="variable.deleted",
        scope=w.key.scope,
        scope_id=w.key.scope_id,
        target=name,
        revision=w.plan.revision,
        detail={"turn": w.req.turn, "call_id": w.req.call_id},
    )


async def list_(ctx: StoreContext, req: VariableList) -> dict[str, Any]:
    limits = ctx.limits
    limit = clamp(req.limit, default=limits.list_limit_default, cap=limits.list_limit_cap)
    async with ctx.pool.acquire() as conn:
        key = await _scope(conn, ctx, req, "list")
        await _check_turn_open(conn, req, key)
        found, total = await variable_store.listing(conn, key, req.prefix, limit)
        state = await variable_store.scope_state(conn, key)
    return {
        "scope": req.scope,
        "scope_revision": state.revision,
        "variables": [
            listing_view(v.name, v.value, v.revision, v.size, limits.summary_chars) for v in found
        ],
        "source_count": total,
        "truncated": total > len(found),
    }
