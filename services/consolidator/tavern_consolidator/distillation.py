"""Background distillation of one scope (acp.md §12.3), in the order that makes a crash at any
point safe: the batch row is opened before the model is called, the model's output is stored
before anything is proposed, and the watermark moves in the transaction that closes the batch.
A batch found `running` after a restart never got an answer (it is marked interrupted and its
items are read again); one found `distilled` proposes its stored output again (ids derive from
the fields, so nothing doubles) and then closes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tavern_consolidator.domain import distil, throttle
from tavern_consolidator.domain.records import Evidence, Proposed
from tavern_consolidator.errors import LedgerRefused, translated
from tavern_consolidator.ledger_client import LedgerClient
from tavern_consolidator.model import Model
from tavern_consolidator.store import Conn, PoolSource, batches, connection, transaction
from tavern_consolidator.store.batches import BatchRow, Failure
from tavern_events.rpc.ledger import MAX_PROPOSED
from tavern_runtime.errors import TavernError
from tavern_runtime.logs import get_logger
from tavern_runtime.pg import holds_session_state

log = get_logger(__name__)

Clock = Callable[[], datetime]
StyleHook = Callable[[str, tuple[str, ...]], Awaitable[None]]


@dataclass(frozen=True)
class Retry:
    base_s: float = 60.0
    max_s: float = 3600.0


@dataclass(frozen=True)
class Outcome:
    mode: str  # model | fallback | failed
    observations: tuple[Proposed, ...] = ()
    error: str = ""


class Distillation:
    def __init__(
        self,
        pool: PoolSource,
        model: Callable[[], Model],
        ledger: LedgerClient,
        thresholds: throttle.Thresholds,
        retry: Retry,
        clock: Clock,
    ) -> None:
        self._pool, self._model, self._ledger = pool, model, ledger
        self._t, self._retry, self._clock = thresholds, retry, clock
        self.on_style: StyleHook | None = None

    async def run(self, scope_id: str, *, force: bool = False) -> dict[str, Any]:
        """One batch of the scope if it is due (or `force`d), under the scope's lock. A wake
        with nothing to do (most are throttled) answers before it takes the lock: that check
        writes nothing but the scope's bookkeeping row, and a batch opened meanwhile by another
        holder of the lock is met by the next wake."""
        if not force:
            quiet = await self._quiet(scope_id, self._clock())
            if quiet is not None:
                return quiet
        async with self._locked(scope_id) as held:
            if not held:
                return {"ran": False, "reason": "locked"}
            return await self._run(scope_id, force)

    async def _run(self, scope_id: str, force: bool) -> dict[str, Any]:
        now = self._clock()
        started: dict[str, Any] | tuple[int, list[Evidence]] = {}
        async with transaction(self._pool) as conn:
            state = await batches.scope_state(conn, scope_id)
            open_batch = await self._open(conn, scope_id, now)
            if open_batch is None:
                started = await self._start(conn, state, force, now)
        if open_batch is not None:
            if not force and throttle.paused(state, now):
                return {"ran": False, "reason": "retry_wait"}
            return await self._propose(open_batch)
        if isinstance(started, dict):
            return started
        return await self._distil(state, *started)

    async def _quiet(self, scope_id: str, now: datetime) -> dict[str, Any] | None:
        """Why this wake runs no batch, read in one statement outside a transaction (most wakes
        are throttled); None: a batch is open or due, and the run reads again in its own."""
        async with connection(self._pool) as conn:
            found = await batches.wake(conn, scope_id)
        if found.open_batch:
            return None
        reason = throttle.due(found.undigested, found.turns, self._t)
        refusal = self._refusal(found.state, reason, False, now)
        return {"ran": False, "reason": refusal} if refusal else None

    async def _open(self, conn: Conn, scope_id: str, now: datetime) -> BatchRow | None:
        """The batch to resume: a `distilled` one. A `running` one never got its answer (the
        process stopped): it is closed as interrupted and its items are read again."""
        found = await batches.open_batch(conn, scope_id)
        if found is not None and found.status == "running":
            await batches.interrupt(conn, found.id, now)
            return None
        return found

    async def _start(
        self, conn: Conn, state: throttle.ScopeState, force: bool, now: datetime
    ) -> dict[str, Any] | tuple[int, list[Evidence]]:
        """Open a batch of the oldest undigested items, or say why none runs."""
        undigested, turns = await batches.counts(conn, state)
        reason = "forced" if force else throttle.due(undigested, turns, self._t)
        refusal = self._refusal(state, reason, force, now)
        if refusal:
            return {"ran": False, "reason": refusal}
        await batches.reset_turns(conn, state.scope_id, now)
        batch = await batches.undigested(conn, state, self._t.max_batch)
        if not batch:  # an empty batch writes nothing: no audit row, no watermark
            return {"ran": True, "digested": 0, "observations": 0}
        return await batches.start(conn, state, batch, str(reason), now.date()), batch

    def _refusal(
        self, state: throttle.ScopeState, reason: str | None, force: bool, now: datetime
    ) -> str | None:
        if reason is None:
            return "throttle"
        if not force and throttle.paused(state, now):
            return "retry_wait"
        if throttle.capped(state, now.date(), self._t):
            return "daily_cap"
        return None

    async def _distil(
        self, state: throttle.ScopeState, batch_id: int, batch: Sequence[Evidence]
    ) -> dict[str, Any]:
        outcome = await self.distil(batch)
        now = self._clock()
        if outcome.mode == "failed":
            await self._failed(state, batch_id, len(batch), outcome.error, now)
            return {"ran": True, "digested": 0, "observations": 0, "reason": "llm_failed"}
        async with transaction(self._pool) as conn:
            await batches.distilled(conn, batch_id, outcome.mode, outcome.observations)
        row = BatchRow(
            batch_id,
            state.scope_id,
            "distilled",
            outcome.mode,
            batch[-1].observed_at,
            batch[-1].id,
            tuple(e.id for e in batch),
            outcome.observations,
            state.fail_count,
        )
        return await self._propose(row)

    async def distil(self, batch: Sequence[Evidence]) -> Outcome:
        """Two model attempts; the rule fallback only when no model can be reached."""
        model = self._model()
        if not model.configured:
            return Outcome("fallback", distil.fallback(batch))
        messages = distil.build_messages(batch)
        ids = [e.id for e in batch]
        attempts: list[distil.Attempt] = []
        for _ in range(distil.ATTEMPTS):
            attempt = await model.attempt(messages, ids)
            attempts.append(attempt)
            if attempt.distilled is not None:
                return Outcome("model", attempt.distilled.observations)
        if distil.settle(attempts) == "fallback":
            log.warning("distillation_fallback", error=distil.failure_text(attempts))
            return Outcome("fallback", distil.fallback(batch))
        return Outcome("failed", error=distil.failure_text(attempts))

    async def _failed(
        self, state: throttle.ScopeState, batch_id: int, size: int, error: str, now: datetime
    ) -> None:
        fails = state.fail_count + 1
        retry_at = throttle.retry_at(fails, now, self._retry.base_s, self._retry.max_s)
        async with transaction(self._pool) as conn:
            await batches.failed(
                conn, batch_id, state.scope_id, Failure(error, size, now, retry_at)
            )
        log.warning(
            "distillation_failed",
            scope_id=state.scope_id,
            batch_id=batch_id,
            error=error,
            failures=fails,
            retry_at=retry_at.isoformat(),
        )

    async def _propose(self, row: BatchRow) -> dict[str, Any]:
        """Propose the stored observations (again, after a crash: the ledger finds the same ids),
        then close the batch and move the watermark."""
        try:
            written = await self._propose_all(row)
        except TavernError as exc:
            await self._stalled(row, exc.message)
            return {"ran": True, "digested": 0, "observations": 0, "reason": "ledger_unavailable"}
        async with transaction(self._pool) as conn:
            await batches.succeeded(conn, row, len(row.observations), written, self._clock())
        log.info(
            "batch_distilled",
            scope_id=row.scope_id,
            batch_id=row.id,
            mode=row.mode,
            digested=len(row.evidence_ids),
            observations=written,
            failures_before=row.failures_before,
        )
        return {
            "ran": True,
            "batch_id": row.id,
            "mode": row.mode,
            "digested": len(row.evidence_ids),
            "observations": written,
            "failures_before": row.failures_before,
        }

    async def _propose_all(self, row: BatchRow) -> int:
        """The batch's observations in requests of up to `MAX_PROPOSED`, each stored by the
        ledger in one transaction. A request the ledger refuses whole (one malformed
        observation fails its shape) is proposed again one by one, so only that one is lost."""
        written = 0
        for at in range(0, len(row.observations), MAX_PROPOSED):
            chunk = row.observations[at : at + MAX_PROPOSED]
            try:
                replies = await self._ledger.propose_batch(row.scope_id, chunk, row.batch_to)
            except LedgerRefused as exc:
                log.warning(
                    "observations_refused_together", scope_id=row.scope_id, error=exc.message
                )
                replies = [await self._propose_one(row, obs) for obs in chunk]
            written += sum(self._stored(row, reply) for reply in replies)
        for obs in row.observations:
            if obs.claim_domain == "style" and obs.evidence_ids and self.on_style is not None:
                await self.on_style(row.scope_id, obs.evidence_ids)
        return written

    async def _propose_one(self, row: BatchRow, obs: Proposed) -> dict[str, Any]:
        try:
            return await self._ledger.propose(row.scope_id, obs, row.batch_to)
        except LedgerRefused as exc:
            return {"error": {"message": exc.message}}

    def _stored(self, row: BatchRow, reply: dict[str, Any]) -> int:
        """1 if the ledger stored the observation; a refused one is logged and the batch goes
        on (it can never be stored)."""
        if "error" in reply:
            log.warning("observation_refused", scope_id=row.scope_id, error=reply["error"])
            return 0
        if reply.get("alert"):
            log.warning("observation_without_backlink", observation_id=reply.get("observation_id"))
        if not reply.get("stored"):
            log.info("observation_blocked", scope_id=row.scope_id, reasons=reply.get("reasons"))
            return 0
        return 1

    async def _stalled(self, row: BatchRow, error: str) -> None:
        """The ledger did not take the output: the batch stays distilled and is resumed later."""
        now = self._clock()
        async with transaction(self._pool) as conn:
            state = await batches.scope_state(conn, row.scope_id)
            retry_at = throttle.retry_at(
                state.fail_count + 1, now, self._retry.base_s, self._retry.max_s
            )
            await batches.note_error(conn, row.id, error)
            await batches.stalled(
                conn, row.scope_id, Failure(error, len(row.evidence_ids), now, retry_at)
            )
        log.warning("distillation_stalled", scope_id=row.scope_id, batch_id=row.id, error=error)

    @contextlib.asynccontextmanager
    async def _locked(self, scope_id: str) -> AsyncIterator[bool]:
        """A session-level advisory lock per scope: one batch per scope across replicas; a
        crashed holder's lock goes with its connection."""
        async with connection(self._pool) as conn:
            key = f"consolidator:distil:{scope_id}"
            holds_session_state(conn)
            held = await conn.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", key)
            try:
                yield bool(held)
            finally:
                if held:
                    with translated():
                        await conn.execute(
                            "SELECT pg_advisory_unlock(hashtextextended($1, 0))", key
                        )
