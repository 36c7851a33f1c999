"""Corrections said in conversation, applied where they are ingested: each new correction row
replaces the earlier statement it clearly contradicts (`domain.contradiction`), in the same
transaction as the row, with lineage and audit as `ledger correct` writes them. A correction
that matches nothing stays a new fact beside the old ones; it never takes anything away."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from tavern_ledger import audit
from tavern_ledger.changes import Actor, commit_change
from tavern_ledger.domain import lifecycle
from tavern_ledger.domain.claims import is_directive
from tavern_ledger.domain.contradiction import Stated, probe_terms, targets
from tavern_ledger.domain.extract import SESSION_EVENT_INGEST
from tavern_ledger.domain.records import AuditEntry, EvidenceRow
from tavern_ledger.evidence import Conn
from tavern_ledger.evidence import rows as evidence
from tavern_runtime.logs import get_logger

log = get_logger(__name__)


async def apply_spoken_corrections(conn: Conn, rows: Sequence[EvidenceRow], now: datetime) -> int:
    """Supersede what the batch's new correction rows contradict; returns how many were."""
    replaced = 0
    for row in rows:
        if _spoken_correction(row):
            replaced += await _apply(conn, row, now)
    return replaced


def _spoken_correction(row: EvidenceRow) -> bool:
    """A correction of fact said in conversation. A corrected directive ("不对, 要用四个空格")
    replaces nothing here: the rules channel drafts rules from those, said again and again."""
    return (
        row.source_class == "user_correction"
        and row.state == "active"
        and row.ingest == SESSION_EVENT_INGEST
        and not is_directive(row.content)
    )


async def _apply(conn: Conn, row: EvidenceRow, now: datetime) -> int:
    found = await evidence.statements_before(conn, row, probe_terms(row.content))
    # A person corrects what they said themselves: in a chat of several people (`user:<name>`
    # labels) another speaker's statement is not theirs to replace.
    stated = [
        s for s in found if s.source_label == row.source_label and not is_directive(s.content)
    ]
    chosen = targets(row.content, [Stated(s.id, s.content) for s in stated])
    if not chosen:
        return 0
    actor = Actor("user", f"correction said in session {row.session_id}")
    by_id = {s.id: s for s in stated}
    for target_id in chosen:
        change = lifecycle.apply(by_id[target_id], "supersede", now, at=row.observed_at)
        await commit_change(conn, change, "supersede", actor, now, replaced_by=row.id)
    lineage = replace(
        row,
        supersedes=tuple(dict.fromkeys((*row.supersedes, *chosen))),
        valid_from=row.valid_from or row.observed_at,
        updated_at=now,
    )
    await evidence.save_change(conn, lineage)
    await audit.append_one(conn, _correct_entry(lineage, chosen, actor))
    log.info("spoken_correction_applied", session_id=row.session_id, superseded=len(chosen))
    return len(chosen)


def _correct_entry(row: EvidenceRow, chosen: Sequence[str], actor: Actor) -> AuditEntry:
    return AuditEntry(
        op="correct",
        scope_id=row.scope_id,
        actor=actor.name,
        reason=actor.reason,
        target_id=row.id,
        payload={
            "contentHash": row.content_hash,
            "state": row.state,
            "corrects": list(chosen),
            "matched_by": "rules",
            "session_id": row.session_id,
            "source_event_id": row.source_event_id,
        },
    )
