"""Ingestion of session events: one transaction per ordered batch writes the evidence rows, their
postings, the audit entries, the LEDGER facts (outbox) and the checkpoint together. The batch is
planned and written in parts, a statement each, so Postgres writes one while the next is planned.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from tavern_ledger.domain.admission import Admitted
from tavern_ledger.domain.extract import ExtractConfig, SessionFacts
from tavern_ledger.domain.facts import evidence_appended, outbox_record
from tavern_ledger.domain.gates import GateConfig
from tavern_ledger.domain.ingestion import BatchPlan, BatchPlanner, Incoming
from tavern_ledger.domain.records import AuditEntry, EvidenceRow
from tavern_ledger.embedding import Embedder, shared_encoder
from tavern_ledger.errors import translated
from tavern_ledger.evidence import Conn, ingest
from tavern_ledger.supersession import apply_spoken_corrections
from tavern_runtime.pg import Pool

Clock = Callable[[], datetime]
Creations = Callable[[Collection[str]], Awaitable[Mapping[str, SessionFacts]]]
"""The facts of sessions from their `session/created`, for sessions ingestion has not stored."""
T = TypeVar("T")
PART = 32
"""Most events per statement: Postgres writes one part of a batch while the next is decoded and
planned."""


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


@dataclass
class _Tally:
    """What the parts of one batch planned and wrote."""

    admitted: int = 0
    refused: int = 0
    skipped: int = 0
    last_stream_seq: int = 0
    sessions: dict[str, SessionFacts] = field(default_factory=dict)
    inserted: list[EvidenceRow] = field(default_factory=list)

    def add(self, plan: BatchPlan) -> None:
        self.admitted += len(plan.admitted)
        self.refused += len(plan.refused)
        self.skipped += sum(plan.skipped.values())
        self.last_stream_seq = max(self.last_stream_seq, plan.last_stream_seq)
        self.sessions.update(plan.sessions)

    def outcome(self) -> IngestOutcome:
        return IngestOutcome(
            inserted=len(self.inserted),
            refused=self.refused,
            skipped=self.skipped,
            already=self.admitted - len(self.inserted),
            rows=tuple(self.inserted),
        )


class Ingestor:
    """Writes planned batches; the plan itself is pure (`domain.ingestion`)."""

    def __init__(
        self,
        pool: Callable[[], Pool],
        consumer: str,
        gate: GateConfig,
        extract: ExtractConfig,
        clock: Clock = utc_now,
        creations: Creations | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self._pool, self._consumer = pool, consumer
        self._gate, self._extract, self._clock = gate, extract, clock
        self._creations = creations
        self._embedder = embedder or shared_encoder()

    async def ingest(
        self, parts: Iterable[Sequence[Incoming]], sessions: Collection[str], through: int = 0
    ) -> IngestOutcome:
        """Plan and commit one batch in one transaction. `parts` is the batch cut in order, and
        may decode each part only when it is asked for: Postgres writes one part while the next
        is decoded and planned. `sessions` names every session the batch's events belong to.
        The checkpoint moves to the batch's last stream sequence, or to `through` if higher
        (messages skipped or dead-lettered)."""
        with translated():
            async with self._pool().acquire() as conn, conn.transaction():
                return await self._commit(conn, parts, sessions, through)

    async def _commit(
        self,
        conn: Conn,
        parts: Iterable[Sequence[Incoming]],
        sessions: Collection[str],
        through: int,
    ) -> IngestOutcome:
        known = await ingest.sessions(conn, sessions)
        unseen = [s for s in sessions if s not in known]
        learned: Mapping[str, SessionFacts] = {}
        if unseen and self._creations is not None:
            # Replicas share the durable: the batch carrying a session's creation may still be
            # in another replica's hands. Its scope and type come from its log, not the order.
            learned = await self._creations(unseen)
            await ingest.save_sessions(conn, list(learned.values()))
            known.update(learned)
        planner = BatchPlanner(known, self._gate, self._extract)
        tally = await self._write_parts(conn, planner, parts)
        # Only rows this transaction inserted: a redelivered correction was applied with its row.
        await apply_spoken_corrections(conn, tally.inserted, self._clock(), self._embedder)
        await ingest.save_sessions(conn, list(tally.sessions.values()))
        # Claimed last and at once, in key order: see `owners.claim_all`.
        await ingest.claim_scopes(conn, [*learned.values(), *tally.sessions.values()])
        checkpoint = max(tally.last_stream_seq, through)
        if checkpoint:
            await ingest.advance_checkpoint(conn, self._consumer, checkpoint)
        return tally.outcome()

    async def _write_parts(
        self, conn: Conn, planner: BatchPlanner, parts: Iterable[Sequence[Incoming]]
    ) -> _Tally:
        """Plan and write the batch part by part: Postgres writes one part while the next one
        is planned (the connection runs one statement at a time, each awaited in turn)."""
        tally, now = _Tally(), self._clock()
        writing: asyncio.Future[list[EvidenceRow]] | None = None
        try:
            for part in parts:
                plan = planner.plan(part)
                tally.add(plan)
                prepared = prepare(plan, now)
                if writing is not None:
                    tally.inserted += await writing
                writing = asyncio.ensure_future(ingest.write_part(conn, prepared))
                await asyncio.sleep(0)  # the statement goes out before the next part is planned
            if writing is not None:
                tally.inserted += await writing
        finally:
            if writing is not None and not writing.done():  # the rollback needs the connection
                with contextlib.suppress(BaseException):
                    await writing
        return tally


def parts(items: Sequence[T], most: int) -> list[Sequence[T]]:
    """`items` cut in order into as few parts of at most `most` as can be, evenly."""
    count = -(-len(items) // most)
    size, longer = divmod(len(items), count) if count else (0, 0)
    bounds = [index * size + min(index, longer) for index in range(count + 1)]
    return [items[start:end] for start, end in itertools.pairwise(bounds)]


def prepare(plan: BatchPlan, now: datetime) -> ingest.PreparedPart:
    admitted = [_admission(a, now) for a in plan.admitted]
    return ingest.prepare_part(admitted, [r.audit for r in plan.refused])


def _admission(admitted: Admitted, now: datetime) -> ingest.Admission:
    row = admitted.row
    fact = outbox_record(evidence_appended(row, now))
    return ingest.Admission(row, _append_audit(row, admitted.reasons), fact)


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
