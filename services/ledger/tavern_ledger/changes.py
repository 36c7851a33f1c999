"""Writing one evidence state change: the row, the lexical index kept in step, its audit entry
and its LEDGER fact, in the caller's transaction. User rights and conversational corrections
both change evidence through here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tavern_ledger import audit, outbox
from tavern_ledger.domain import lifecycle
from tavern_ledger.domain.facts import outbox_record, state_changed
from tavern_ledger.domain.records import AuditEntry
from tavern_ledger.evidence import Conn
from tavern_ledger.evidence import rows as evidence


@dataclass(frozen=True)
class Actor:
    """Who asks, and why (recorded in the audit trail)."""

    name: str = "user"
    reason: str = ""


async def commit_change(
    conn: Conn,
    change: lifecycle.Transition,
    op: str,
    actor: Actor,
    now: datetime,
    replaced_by: str | None = None,
) -> int:
    """Save the row, keep the lexical index in step, audit, and queue the fact."""
    await evidence.save_change(conn, change.after)
    await _reindex(conn, change)
    entry = AuditEntry(
        op=op,
        scope_id=change.after.scope_id,
        actor=actor.name,
        reason=actor.reason or f"user {op}",
        target_id=change.after.id,
        payload={"from": change.from_state, "to": change.to_state, "replaced_by": replaced_by},
    )
    audit_id = await audit.append_one(conn, entry)
    if change.from_state != change.to_state:
        fact = state_changed(
            change.after, change.from_state, audit_id, entry.reason, now, actor.name, replaced_by
        )
        await outbox.enqueue(conn, [outbox_record(fact)])
    return audit_id


async def _reindex(conn: Conn, change: lifecycle.Transition) -> None:
    was = evidence.indexed(change.before)
    now_indexed = evidence.indexed(change.after)
    if was and not now_indexed:
        await evidence.remove_postings(conn, change.before)
    elif now_indexed and not was:
        await evidence.add_postings(conn, [change.after])
