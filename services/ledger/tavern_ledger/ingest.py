"""Ingestion of session events: one transaction per ordered batch writes the evidence rows, their
postings, the audit entries, the LEDGER facts (outbox) and the checkpoint together.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from tavern_ledger import store
from tavern_ledger.domain.extract import ExtractConfig
from tavern_ledger.domain.facts import evidence_appended, outbox_record
from tavern_ledger.domain.gates import GateConfig
from tavern_ledger.domain.ingestion import BatchPlan, Incoming, plan_batch
from tavern_ledger.domain.records import AuditEntry, EvidenceRow
from tavern_ledger.errors import translated
from tavern_ledger.store import audit, evidence, ingest, outbox
from tavern_runtime.pg import Pool

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class IngestOutcome:
    inserted: int
    refused: int
    skipped: int
    already: int
    """Admitted rows that were stored before (a redelivery or a replay)."""
    rows: tuple[EvidenceRow, ...] = ()
    """The rows this batch inserted."""

    def counts(self) -> dict[str, int]:
        return {
            "inserted": self.inserted,
            "refused": self.refused,
            "skipped": self.skipped,
            "already": self.already,
        }


class Ingestor:
    """Writes planned batches; the plan itself is pure (`domain.ingestion`)."""

    def __init__(
        self,
        pool: Callable[[], Pool],
        consumer: str,
        gate: GateConfig,
        extract: ExtractConfig,
        clock: Clock = utc_now,
    ) -> None:
        self._pool, self._consumer = pool, consumer
        self._gate, self._extract, self._clock = gate, extract, clock

    async def ingest(self, incoming: Sequence[Incoming], through: int = 0) -> IngestOutcome:
        """Plan and commit one batch in one transaction; the checkpoint moves to the batch's
        last stream sequence, or to `through` if higher (messages skipped or dead-lettered)."""
        with translated():
            async with self._pool().acquire() as conn, conn.transaction():
                return await self._commit(conn, incoming, through)

    async def _commit(
        self, conn: store.Conn, incoming: Sequence[Incoming], through: int
    ) -> IngestOutcome:
        known = await ingest.sessions(conn, {i.event.session_id for i in incoming})
        plan = plan_batch(incoming, known, self._gate, self._extract)
        await ingest.save_sessions(conn, list(plan.sessions.values()))
        inserted = await evidence.insert(conn, [a.row for a in plan.admitted])
        await audit.append(conn, _audits(plan, inserted))
        now = self._clock()
        await outbox.enqueue(conn, [outbox_record(evidence_appended(r, now)) for r in inserted])
        checkpoint = max(plan.last_stream_seq, through)
        if checkpoint:
            await ingest.advance_checkpoint(conn, self._consumer, checkpoint)
        return IngestOutcome(
            inserted=len(inserted),
            refused=len(plan.refused),
            skipped=sum(plan.skipped.values()),
            already=len(plan.admitted) - len(inserted),
            rows=tuple(inserted),
        )


def _audits(plan: BatchPlan, inserted: list[EvidenceRow]) -> list[AuditEntry]:
    reasons = {a.row.id: a.reasons for a in plan.admitted}
    entries = [_append_audit(row, reasons[row.id]) for row in inserted]
    return entries + [r.audit for r in plan.refused]


def _append_audit(row: EvidenceRow, reasons: tuple[str, ...]) -> AuditEntry:
    reason = "evidence appended"
    if row.state != "active":
        reason = f"evidence {row.state}: " + ", ".join(reasons)
    return AuditEntry(
        op="append",
        scope_id=row.scope_id,
        actor="system",
        reason=reason,
        target_id=row.id,
        payload={
            "contentHash": row.content_hash,
            "state": row.state,
            "reasons": list(reasons),
            "session_id": row.session_id,
            "source_event_id": row.source_event_id,
        },
    )
