"""The memory index from the LEDGER stream: evidence and memory records, searchable while
active. A redaction blanks the evidence and removes the message it came from from every
projection: the history index, the chat file and (as a mark) the archive."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import tzinfo
from typing import ClassVar

from tavern_events import subjects
from tavern_events.streams import LEDGER
from tavern_projector.domain.memory import EvidenceRow, MemoryRow, StateChange, change_of
from tavern_projector.framework import Conn, Entry, Projection, Target, lock_redactions
from tavern_projector.projections.chat import redact_line
from tavern_runtime.logs import get_logger

log = get_logger(__name__)


class MemoryProjection(Projection):
    name: ClassVar[str] = "memory"
    version: ClassVar[int] = 1
    stream: ClassVar[str] = LEDGER.name
    filters: ClassVar[tuple[str, ...]] = (subjects.LEDGER_ALL,)
    tables: ClassVar[tuple[str, ...]] = ("evidence", "memories")
    by_session: ClassVar[bool] = False

    def __init__(self, live: Target, tz: tzinfo) -> None:
        self.live, self.tz = live, tz

    async def apply(self, conn: Conn, entries: Sequence[Entry], target: Target) -> None:
        changes = [c for e in entries if e.event is not None and (c := change_of(e.event))]
        if any(isinstance(c, StateChange) and c.redacts for c in changes):
            await lock_redactions(conn, exclusive=True)
        for change in changes:
            if isinstance(change, EvidenceRow):
                await upsert_evidence(conn, target, change)
            elif isinstance(change, MemoryRow):
                await upsert_memory(conn, target, change)
            else:
                await self._state_changed(conn, target, change)

    async def _state_changed(self, conn: Conn, target: Target, change: StateChange) -> None:
        origin = await conn.fetchrow(
            f"""UPDATE {target.table("evidence")} SET state = $2, updated_at = $3,
                   text = CASE WHEN $2 = 'redacted' THEN '' ELSE text END,
                   tokens = CASE WHEN $2 = 'active' THEN tokens ELSE '{{}}' END
                WHERE evidence_id = $1 RETURNING session_id, seq, event_id, text""",
            change.evidence_id,
            change.to_state,
            change.at,
        )
        if change.to_state == "active" and origin is not None:
            await reindex_evidence(conn, target, change.evidence_id)
        if change.redacts and origin is not None and origin["session_id"] and origin["seq"]:
            await self._redact(
                conn, change, origin["session_id"], origin["seq"], origin["event_id"]
            )

    async def _redact(
        self, conn: Conn, change: StateChange, session_id: str, seq: int, event_id: str | None
    ) -> None:
        inserted = await conn.fetchval(
            """INSERT INTO projector.redactions (session_id, seq, event_id, evidence_id, reason,
                   redacted_at)
               VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING seq""",
            session_id,
            seq,
            event_id,
            change.evidence_id,
            change.reason,
            change.at,
        )
        await redact_everywhere(conn, self.live, self.tz, session_id, seq, change)
        log.info("message_redacted", session_id=session_id, seq=seq, first=inserted is not None)


async def redact_everywhere(
    conn: Conn, live: Target, tz: tzinfo, session_id: str, seq: int, change: StateChange
) -> None:
    """Remove one session message's content from the history index and chat; mark the archive."""
    await conn.execute(
        """UPDATE projector.history SET text = '', tokens = '{}', redacted = true
           WHERE session_id = $1 AND seq = $2""",
        session_id,
        seq,
    )
    await conn.execute(
        """UPDATE projector.session_events SET redacted_at = $3, redaction_reason = $4
           WHERE session_id = $1 AND log_seq = $2 AND redacted_at IS NULL""",
        session_id,
        seq,
        change.at,
        change.reason,
    )
    await redact_line(conn, live, tz, session_id, seq)


async def upsert_evidence(conn: Conn, target: Target, row: EvidenceRow) -> None:
    await conn.execute(
        f"""INSERT INTO {target.table("evidence")} (evidence_id, scope_id, text, state,
               authority, claim_domain, session_id, seq, event_id, tokens, updated_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
            ON CONFLICT (evidence_id) DO NOTHING""",
        row.evidence_id,
        row.scope_id,
        row.text,
        row.state,
        row.authority,
        row.claim_domain,
        row.session_id,
        row.seq,
        row.event_id,
        row.tokens,
        row.updated_at,
    )


async def reindex_evidence(conn: Conn, target: Target, evidence_id: str) -> None:
    from tavern_projector.domain import text

    value = await conn.fetchval(
        f"SELECT text FROM {target.table('evidence')} WHERE evidence_id = $1", evidence_id
    )
    await conn.execute(
        f"UPDATE {target.table('evidence')} SET tokens = $2 WHERE evidence_id = $1",
        evidence_id,
        text.index_tokens(value or ""),
    )


async def upsert_memory(conn: Conn, target: Target, row: MemoryRow) -> None:
    table = target.table("memories")
    await conn.execute(
        f"""INSERT INTO {table} (memory_id, scope, scope_id, kind, content, tags, revision,
               state, tokens, updated_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
            ON CONFLICT (memory_id) DO UPDATE SET scope = EXCLUDED.scope,
               scope_id = EXCLUDED.scope_id, kind = EXCLUDED.kind,
               content = CASE WHEN EXCLUDED.state = 'forgotten' THEN NULL
                              ELSE COALESCE(EXCLUDED.content, {table}.content) END,
               tags = EXCLUDED.tags, revision = EXCLUDED.revision, state = EXCLUDED.state,
               tokens = CASE WHEN EXCLUDED.state = 'forgotten' THEN '{{}}'
                             WHEN EXCLUDED.content IS NULL THEN {table}.tokens
                             ELSE EXCLUDED.tokens END,
               updated_at = EXCLUDED.updated_at""",
        row.memory_id,
        row.scope,
        row.scope_id,
        row.kind,
        row.content,
        list(row.tags),
        row.revision,
        row.state,
        row.tokens,
        row.updated_at,
    )
