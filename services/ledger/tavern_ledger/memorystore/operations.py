"""Memory operations: search, read, write, update, forget.

The scope comes from the session's binding; every write passes the ledger's write gate; every
change is audited and its `memory/changed` fact queued in the ledger's outbox in its own
transaction (the relay publishes it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tavern_ledger import audit, outbox
from tavern_ledger.domain import memory as rules
from tavern_ledger.domain.facts import outbox_record
from tavern_ledger.domain.memory import GateOutcome, MemoryRecord, MemoryState
from tavern_ledger.domain.scopes import ScopeKey, Scopes, owns, readable_keys, scope_key
from tavern_ledger.domain.store_facts import MemoryOp, Origin, memory_changed
from tavern_ledger.domain.store_limits import clamp
from tavern_ledger.domain.store_requests import (
    MemoryForget,
    MemoryRead,
    MemorySearch,
    MemoryUpdate,
    MemoryWrite,
    StoreRequest,
)
from tavern_ledger.domain.store_views import change_view, memory_view, search_view
from tavern_ledger.memorystore import rows as memory_store
from tavern_ledger.memorystore.rows import SearchFilter
from tavern_ledger.scopes.bindings import Conn
from tavern_ledger.scopes.tool_calls import authorise, refuse
from tavern_ledger.toolcalls.context import StoreContext
from tavern_ledger.toolcalls.errors import NotFound, RevisionConflict, ScopeForbidden


@dataclass(frozen=True)
class Call:
    """One memory request in flight: its connection, context, request and operation."""

    conn: Conn
    ctx: StoreContext
    req: StoreRequest
    op: str

    @property
    def tool(self) -> str:
        return f"memory_{self.op}"

    async def scopes(self) -> Scopes:
        return await authorise(self.conn, self.req, self.tool)

    def key(self, scopes: Scopes, scope: str) -> ScopeKey:
        return scope_key(
            scopes,
            scope,
            session_id=self.req.session_id,
            turn=self.req.turn,
            global_enabled=self.ctx.global_enabled,
        )


async def search(ctx: StoreContext, req: MemorySearch) -> dict[str, Any]:
    limits, now = ctx.limits, ctx.now()
    words = rules.tokens(req.query)
    tags = rules.normalize_tags(req.tags, limits)
    async with ctx.pool.acquire() as conn:
        call = Call(conn, ctx, req, "search")
        scopes = await call.scopes()
        keys = readable_keys(scopes, global_enabled=ctx.global_enabled)
        wanted = SearchFilter(
            keys=keys if req.scope is None else [call.key(scopes, req.scope)],
            now=now,
            tags=tags,
            since=req.since,
            until=req.until,
            patterns=rules.like_patterns(words),
            cap=limits.search_candidates,
        )
        found = await memory_store.candidates(conn, wanted)
    limit = clamp(req.limit, default=limits.search_limit_default, cap=limits.search_limit_cap)
    budget = clamp(
        req.max_tokens, default=limits.search_tokens_default, cap=limits.search_tokens_cap
    )
    return search_view(rules.rank(found, words, now, limit=limit, max_tokens=budget))


async def read(ctx: StoreContext, req: MemoryRead) -> dict[str, Any]:
    async with ctx.pool.acquire() as conn:
        call = Call(conn, ctx, req, "read")
        record = await _own_record(call, req.id)
    if record is None or not _readable(record, ctx.now()):
        return {"found": False, "id": req.id}
    return {"found": True, "memory": memory_view(record)}


def _readable(record: MemoryRecord, now: datetime) -> bool:
    """Active and unexpired, or quarantined (shown without content); never forgotten."""
    unexpired = record.expires_at is None or record.expires_at > now
    return unexpired and record.state != "forgotten"


async def _own_record(call: Call, memory_id: str) -> MemoryRecord | None:
    """The record, if it exists; one of another session's scopes is refused and audited."""
    scopes = await call.scopes()
    record = await memory_store.load(call.conn, memory_id)
    if record is None:
        return None
    key = ScopeKey(record.scope, record.scope_id)
    if not owns(scopes, key, global_enabled=call.ctx.global_enabled):
        named = {"memory_id": record.id, "scope": record.scope}
        await refuse(call.conn, call.req, scopes, call.tool, "memory of another scope", named)
        raise ScopeForbidden(f"memory {record.id!r} is not in a scope of this session")
    return record


async def write(ctx: StoreContext, req: MemoryWrite) -> dict[str, Any]:
    now = ctx.now()
    content = rules.check_content(req.content, ctx.limits)
    tags = rules.normalize_tags(req.tags, ctx.limits)
    expires_at = rules.expiry(now, req.ttl_s, ctx.limits)
    async with ctx.pool.acquire() as conn:
        call = Call(conn, ctx, req, "write")
        key = call.key(await call.scopes(), req.scope)
        outcome, state = await _gated(call, key, content, req.claim_domain)
        record = MemoryRecord(
            id=ctx.new_id(),
            scope=key.scope,
            scope_id=key.scope_id,
            kind=req.kind,
            content=outcome.text or content,
            tags=tags,
            importance=req.importance,
            confidence=req.confidence,
            claim_domain=req.claim_domain,
            source=_source(req, "memory_write"),
            state=state,
            gate_reasons=outcome.reasons,
            revision=1,
            created_at=now,
            updated_at=now,
            expires_at=expires_at,
        )
        await _commit(call, record, "written", insert=True)
    return change_view(record)


async def _gated(
    call: Call, key: ScopeKey, text: str, claim_domain: str
) -> tuple[GateOutcome, MemoryState]:
    """The gate's verdict on `text`; a block is audited (reasons only, never the text)."""
    outcome = call.ctx.gate(text, claim_domain)
    if outcome.action == "block":
        entry = audit.ToolCallEntry(
            session_id=call.req.session_id,
            tool=call.tool,
            op="memory.blocked",
            scope=key.scope,
            scope_id=key.scope_id,
            reason="write gate",
            detail={"reasons": list(outcome.reasons), "call_id": call.req.call_id},
        )
        await audit.append_tool_call(call.conn, entry)
    return outcome, rules.gated_state(outcome)


def _source(req: StoreRequest, tool: str) -> dict[str, Any]:
    """Where a memory came from: the session, turn, step and tool call that wrote it."""
    source: dict[str, Any] = {
        "kind": "agent-tool",
        "tool": tool,
        "session_id": req.session_id,
        "turn": req.turn,
        "step": req.step,
        "call_id": req.call_id,
        "agent_id": req.agent_id,
    }
    ref = getattr(req, "source_ref", None)
    if ref:
        source["ref"] = ref
    return source


async def _commit(
    call: Call, record: MemoryRecord, op: MemoryOp, *, insert: bool = False, reason: str = ""
) -> None:
    """Store the record (conditional on its previous revision), audit it, queue its fact."""
    origin = Origin(call.req.session_id, f"tool:{call.tool}", record.updated_at)
    fact = outbox_record(memory_changed(record, op, origin))
    async with call.conn.transaction():
        if insert:
            await memory_store.insert(call.conn, record)
        elif not await memory_store.replace(call.conn, record):
            raise await _conflict(call.conn, record)
        await audit.append_tool_call(call.conn, _audit_entry(call, record, op, reason))
        await outbox.enqueue(call.conn, [fact])


def _audit_entry(
    call: Call, record: MemoryRecord, op: MemoryOp, reason: str
) -> audit.ToolCallEntry:
    return audit.ToolCallEntry(
        session_id=call.req.session_id,
        tool=call.tool,
        op=f"memory.{op}",
        scope=record.scope,
        scope_id=record.scope_id,
        target=record.id,
        revision=record.revision,
        reason=reason,
        detail={"state": record.state, "call_id": call.req.call_id, "turn": call.req.turn},
    )


async def _conflict(conn: Conn, record: MemoryRecord) -> RevisionConflict:
    latest = await memory_store.load(conn, record.id)
    current = latest.revision if latest is not None else 0
    return RevisionConflict(
        f"memory {record.id!r} changed in another operation (now at revision {current})",
        current_revision=current,
    )


async def update(ctx: StoreContext, req: MemoryUpdate) -> dict[str, Any]:
    async with ctx.pool.acquire() as conn:
        call = Call(conn, ctx, req, "update")
        current = await _changeable(call, req.id)
        rules.check_revision(current, req.expected_revision)
        gated = await _regate(call, req, current)
        edit = rules.Edit(
            tags=req.tags,
            importance=req.importance,
            confidence=req.confidence,
            ttl_s=req.ttl_s,
            source={**current.source, "updated_by": _source(req, "memory_update")},
        )
        record = rules.edited(current, edit, gated, ctx.now(), ctx.limits)
        await _commit(call, record, "updated")
    return change_view(record)


async def _changeable(call: Call, memory_id: str) -> MemoryRecord:
    """The record to change: the session's own, not forgotten, not expired."""
    record = await _own_record(call, memory_id)
    if record is None or not _readable(record, call.ctx.now()):
        raise NotFound(f"memory {memory_id!r} not found")
    return record


async def _regate(
    call: Call, req: MemoryUpdate, current: MemoryRecord
) -> tuple[GateOutcome, str] | None:
    """New content or a new claim domain passes the gate again; else nothing to check."""
    if req.content is None and req.claim_domain is None:
        return None
    text = rules.check_content(req.content or current.content, call.ctx.limits)
    domain = req.claim_domain or current.claim_domain
    outcome, _ = await _gated(call, ScopeKey(current.scope, current.scope_id), text, domain)
    return outcome, domain


async def forget(ctx: StoreContext, req: MemoryForget) -> dict[str, Any]:
    async with ctx.pool.acquire() as conn:
        call = Call(conn, ctx, req, "forget")
        try:
            current = await _changeable(call, req.id)
        except NotFound:
            return {"found": False, "id": req.id}
        rules.check_revision(current, req.expected_revision)
        record = rules.forgotten(current, ctx.now())
        await _commit(call, record, "forgotten", reason=req.reason)
    return {"found": True, "id": record.id, "revision": record.revision, "state": record.state}
