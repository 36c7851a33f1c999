"""The stores' audit entries, written to the ledger's one audit trail (`ledger.audit`), so the
user-rights history shows memory and variable changes and refused cross-scope requests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tavern_ledger import audit as ledger_audit
from tavern_ledger.domain.records import AuditEntry as LedgerAuditEntry
from tavern_ledger.scopes.bindings import Conn

ACTOR = "agent"
"""Store requests come from the agent's tools; which tool is in the payload."""


@dataclass(frozen=True)
class AuditEntry:
    session_id: str
    tool: str
    op: str
    scope_id: str
    scope: str | None = None
    target: str | None = None
    revision: int | None = None
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


def ledger_entry(entry: AuditEntry) -> LedgerAuditEntry:
    payload = {
        "session_id": entry.session_id,
        "tool": entry.tool,
        "scope": entry.scope,
        "revision": entry.revision,
        **entry.detail,
    }
    return LedgerAuditEntry(
        op=entry.op,
        scope_id=entry.scope_id,
        actor=ACTOR,
        reason=entry.reason,
        target_id=entry.target,
        payload=payload,
    )


async def record(conn: Conn, entry: AuditEntry) -> None:
    await ledger_audit.append_one(conn, ledger_entry(entry))
