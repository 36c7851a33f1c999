"""The ledger's one audit trail (`ledger.audit`): append entries (deduplicated by key when they
have one), among them those of the memory and variable stores' tool calls, and query them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tavern_ledger.domain.records import AuditEntry
from tavern_ledger.evidence import Conn

_INSERT = """
INSERT INTO ledger.audit (ts, op, target_id, scope_id, actor, reason, payload, dedupe_key)
SELECT coalesce(ts, now()), op, target_id, scope_id, actor, reason, payload::jsonb, dedupe_key
FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
            $7::text[], $8::text[])
     AS u(ts, op, target_id, scope_id, actor, reason, payload, dedupe_key)
ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
RETURNING id
"""


async def append(conn: Conn, entries: Sequence[AuditEntry]) -> list[int]:
    """Insert `entries`; returns the ids of those written (a known dedupe key writes nothing)."""
    if not entries:
        return []
    found = await conn.fetch(
        _INSERT,
        [e.ts for e in entries],
        [e.op for e in entries],
        [e.target_id for e in entries],
        [e.scope_id for e in entries],
        [e.actor for e in entries],
        [e.reason for e in entries],
        [payload_json(e.payload) for e in entries],
        [e.dedupe_key for e in entries],
    )
    return [int(r["id"]) for r in found]


async def append_one(conn: Conn, entry: AuditEntry) -> int:
    ids = await append(conn, [entry])
    return ids[0] if ids else 0


TOOL_ACTOR = "agent"
"""Store requests come from the agent's tools; which tool is in the payload."""


@dataclass(frozen=True)
class ToolCallEntry:
    """What a memory or variable tool call did (or was refused), for the user-rights history."""

    session_id: str
    tool: str
    op: str
    scope_id: str
    scope: str | None = None
    target: str | None = None
    revision: int | None = None
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


def tool_call_entry(entry: ToolCallEntry) -> AuditEntry:
    payload = {
        "session_id": entry.session_id,
        "tool": entry.tool,
        "scope": entry.scope,
        "revision": entry.revision,
        **entry.detail,
    }
    return AuditEntry(
        op=entry.op,
        scope_id=entry.scope_id,
        actor=TOOL_ACTOR,
        reason=entry.reason,
        target_id=entry.target,
        payload=payload,
    )


async def append_tool_call(conn: Conn, entry: ToolCallEntry) -> None:
    await append_one(conn, tool_call_entry(entry))


_PAYLOAD_JSON = json.JSONEncoder(ensure_ascii=False, default=str)


def payload_json(payload: dict[str, Any] | None) -> str | None:
    return None if payload is None else _PAYLOAD_JSON.encode(payload)


async def query(
    conn: Conn,
    *,
    op: str | None = None,
    scope_id: str | None = None,
    actor: str | None = None,
    target_id: str | None = None,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """Newest first, filtered by whatever is given."""
    found = await conn.fetch(
        "SELECT id, ts, op, target_id, scope_id, actor, reason, payload FROM ledger.audit "
        "WHERE ($1::text IS NULL OR op = $1) AND ($2::text IS NULL OR scope_id = $2) "
        "AND ($3::text IS NULL OR actor = $3) AND ($4::text IS NULL OR target_id = $4) "
        "ORDER BY id DESC LIMIT $5",
        op,
        scope_id,
        actor,
        target_id,
        limit,
    )
    return [audit_dict(r) for r in found]


def audit_dict(record: Any) -> dict[str, Any]:
    data = dict(record)
    payload = data.get("payload")
    data["payload"] = json.loads(payload) if isinstance(payload, str) else payload
    data["ts"] = data["ts"].isoformat()
    return data
