"""Live consumption: one ordered batch at a time, rows and checkpoint in one transaction.

A pull consumer can hand out messages out of stream order: a message fetched but lost in
flight, or a nacked batch, comes back only after later ones were delivered, so a batch may lack
entries before its first one and between its own. The checkpoint alone would then skip them
forever. So when a batch could follow a gap (a redelivery, a jump in the consumer sequence, a
fresh process), the runner reads the stream from its checkpoint through the batch's last entry
and applies whatever the batch lacks in order; the late redelivery is skipped by the checkpoint.

A batch that fails transiently is nacked with a growing delay. One that fails otherwise is
applied entry by entry: the entry that fails is dead-lettered and passed over (logged, with
its stream sequence, for `tavern replay`), the others are applied in order.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from tavern_projector import sources
from tavern_projector.framework import (
    Conn,
    Entry,
    Projection,
    Target,
    fresh,
    lock_projection,
    read_checkpoint,
    write_checkpoint,
)
from tavern_projector.sources import Start
from tavern_runtime import dlq, tracing
from tavern_runtime.errors import TransientError
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

SERVICE = "projector"
MAX_NACK_DELAY_S = 30.0
TRANSIENT = (
    TransientError,
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.SerializationError,
    asyncpg.exceptions.DeadlockDetectedError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CannotConnectNowError,
    # A connection the server dropped mid-query fails its reset with this on release: an
    # outage, not a poison entry (treating it as one would skip entries for good).
    asyncpg.exceptions.InternalClientError,
)


class RetryBatch(Exception):
    """Nack the whole batch; the server redelivers it after `delay` seconds."""

    def __init__(self, delay: float) -> None:
        super().__init__(f"retry in {delay}s")
        self.delay = delay


class VersionMismatch(TransientError):
    """The stored projection was built by other code (a rebuild runs, or a newer replica did)."""

    reason = "projection_version"


def retry_delay(deliveries: int) -> float:
    """Seconds before a failed batch comes back: 0.5, 1, 2, 4 ... capped."""
    return min(MAX_NACK_DELAY_S, 0.5 * 2.0 ** max(0, deliveries - 1))


class LiveRunner:
    """Applies the batches of one durable consumer to one projection's live target."""

    def __init__(
        self,
        projection: Projection,
        consumer: str,
        pool: Callable[[], Any],
        js: Callable[[], JetStreamContext | None],
        target: Target,
    ) -> None:
        self.projection, self.consumer = projection, consumer
        self._pool, self._js, self.target = pool, js, target
        self.applied = 0
        self.gaps_filled = 0
        self._wanted = sources.matcher(projection.filters)
        """Its consumer may read more of the stream than it applies (`catalog.read_through`)."""
        self._last_delivery = 0
        self._owed_through = 0
        """The highest stream seq handed back unapplied (nacked, or failed without an ack):
        until a batch reaching it is applied, any batch may be overtaking it."""

    async def handle(self, msgs: Sequence[Msg]) -> None:
        """Apply one fetched batch; raises `RetryBatch` when it must come back later. What
        the projection does not read is passed over (and acknowledged with the rest)."""
        suspect = self._suspect(msgs)
        delivered = max(m.metadata.sequence.consumer for m in msgs)
        msgs = [m for m in msgs if self._wanted(m.subject)]
        if not msgs:
            self._last_delivery = delivered
            return
        entries = [Entry.of(m) for m in msgs]
        started = time.perf_counter()
        traced = tracing.consumed(
            "projector.project", (m.headers for m in msgs), {"tavern.consumer": self.consumer}
        )
        try:
            with traced:
                done = await self._apply_or_isolate(msgs, entries, suspect)
        except BaseException:
            # These come back later, after newer messages maybe: check every batch till then.
            self._owed_through = max(self._owed_through, *(e.stream_seq for e in entries))
            raise
        self._last_delivery = delivered
        if suspect and max(e.stream_seq for e in entries) >= self._owed_through:
            self._owed_through = 0  # applied from the checkpoint through everything owed
        await self._dead_letter(msgs, entries)
        if done:
            self._report(done, started)

    async def _apply_or_isolate(
        self, msgs: Sequence[Msg], entries: list[Entry], suspect: bool
    ) -> list[Entry]:
        try:
            return await self.apply(entries, check_gaps=suspect)
        except TRANSIENT as exc:
            raise self._nack(msgs, exc) from exc
        except Exception as exc:
            log.error("batch_failed", consumer=self.consumer, error=repr(exc))
            return await self._one_by_one(msgs, entries)

    def _suspect(self, msgs: Sequence[Msg]) -> bool:
        """Whether something may have been delivered before this batch and not applied: a
        redelivery, a jump in the consumer sequence, or messages handed back and not yet
        redelivered (a batch right after a nacked one follows on in consumer sequence)."""
        first = msgs[0].metadata.sequence.consumer
        redelivered = any(m.metadata.num_delivered > 1 for m in msgs)
        jumped = self._last_delivery == 0 or first != self._last_delivery + 1
        return redelivered or jumped or self._owed_through > 0

    def _nack(self, msgs: Sequence[Msg], exc: BaseException) -> RetryBatch:
        deliveries = max(m.metadata.num_delivered for m in msgs)
        delay = retry_delay(deliveries)
        log.warning(
            "batch_retry",
            consumer=self.consumer,
            error=repr(exc),
            deliveries=deliveries,
            retry_in_s=delay,
        )
        return RetryBatch(delay)

    async def apply(self, entries: Sequence[Entry], *, check_gaps: bool = True) -> list[Entry]:
        """Apply what is past the checkpoint (after anything missing before it); return it."""
        name, version = self.projection.name, self.projection.version
        async with self._pool().acquire() as conn, conn.transaction():
            await lock_projection(conn, name)
            checkpoint = await read_checkpoint(conn, name)
            if checkpoint is not None and checkpoint.version != version:
                raise VersionMismatch(f"{name} is at version {checkpoint.version}, code {version}")
            after = checkpoint.stream_seq if checkpoint else 0
            todo = fresh(entries, after)
            if todo and check_gaps:
                todo = await self._complete(after, todo)
            if todo:
                await self._write(conn, todo)
        await self.projection.after_commit(self.target)
        return todo

    async def _write(self, conn: Conn, todo: list[Entry]) -> None:
        await self.projection.apply(conn, todo, self.target)
        await self.projection.finish(conn, self.target)
        await write_checkpoint(
            conn, self.projection.name, self.projection.version, todo[-1].stream_seq
        )

    async def _complete(self, after: int, todo: list[Entry]) -> list[Entry]:
        """`todo` and the stored entries of this projection it lacks between the checkpoint and
        its last entry, in stream order (not only before its first: a nacked batch's entries
        may come back after later ones, and a batch may then hold every other entry)."""
        js = self._js()
        if js is None:
            return todo
        last, have = todo[-1].stream_seq, {e.stream_seq for e in todo}
        found: list[Entry] = []
        batches = sources.stream_batches(
            js, self.projection.stream, self.projection.filters, Start(after + 1)
        )
        async with contextlib.aclosing(batches) as reading:
            async for batch in reading:
                found += [e for e in batch if e.stream_seq <= last and e.stream_seq not in have]
                if batch[-1].stream_seq >= last:
                    break
        if not found:
            return todo
        self.gaps_filled += len(found)
        log.warning("gap_filled", consumer=self.consumer, entries=len(found), through=last)
        return sorted([*found, *todo], key=lambda e: e.stream_seq)

    async def _one_by_one(self, msgs: Sequence[Msg], entries: Sequence[Entry]) -> list[Entry]:
        """Isolate the entry that fails: dead-letter it, skip it, apply the rest in order."""
        done: list[Entry] = []
        for msg, entry in zip(msgs, entries, strict=True):
            try:
                done += await self.apply([entry])  # completes any gap before it
            except TRANSIENT as exc:
                raise self._nack(msgs, exc) from exc
            except Exception as exc:
                await self._skip_poison(msg, entry, exc)
        return done

    async def _skip_poison(self, msg: Msg, entry: Entry, exc: Exception) -> None:
        log.error(
            "entry_skipped", consumer=self.consumer, stream_seq=entry.stream_seq, error=repr(exc)
        )
        entry.error = f"{type(exc).__name__}: {exc}"
        async with self._pool().acquire() as conn, conn.transaction():
            await lock_projection(conn, self.projection.name)
            checkpoint = await read_checkpoint(conn, self.projection.name)
            if checkpoint is None or checkpoint.stream_seq < entry.stream_seq:
                await write_checkpoint(
                    conn, self.projection.name, self.projection.version, entry.stream_seq
                )

    def _report(self, done: list[Entry], started: float) -> None:
        self.applied += len(done)
        log.info(
            "batch_projected",
            consumer=self.consumer,
            events=len(done),
            stream_seq=done[-1].stream_seq,
            ms=round((time.perf_counter() - started) * 1000, 1),
        )

    async def _dead_letter(self, msgs: Sequence[Msg], entries: Sequence[Entry]) -> None:
        js = self._js()
        for msg, entry in zip(msgs, entries, strict=True):
            if entry.error is None or js is None:
                continue
            record = dlq.build_record(
                dlq.Origin(
                    msg.metadata.stream, entry.stream_seq, msg.subject, msg.metadata.num_delivered
                ),
                service=SERVICE,
                consumer=self.consumer,
                reason=entry.error,
                error_type=entry.error.partition(":")[0] or "ContractError",
                headers=msg.headers,
                data=msg.data,
                now=datetime.now(UTC),
            )
            await dlq.publish_record(js, record)
