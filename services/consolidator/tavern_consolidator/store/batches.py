"""Distillation bookkeeping: per-scope state (watermark, daily count, failures), the undigested
evidence after the watermark, the turn counter, and the batch audit rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from tavern_consolidator.domain.records import Evidence, Proposed
from tavern_consolidator.domain.throttle import Position, ScopeState
from tavern_consolidator.store import Conn, audit, from_json, to_json
from tavern_consolidator.store.facts import EVIDENCE_COLUMNS, evidence_row

ACTOR = "consolidation"
OK_REASON = "consolidation ok; watermark advanced"
FAILED_REASON = "consolidation failed; watermark not advanced"
UNDIGESTED = "scope_id = $1 AND state = 'active' AND digestible AND digested_at IS NULL"
"""A scope's copies no successful batch took (marked, not compared with the watermark: a copy
may arrive after a batch with an older time than the batch's latest)."""
_AHEAD = "watermark_at IS NULL OR ($2::timestamptz, $3::text) > (watermark_at, watermark_id)"
STATE_COLUMNS = "scope_id, watermark_at, watermark_id, run_day, run_count, fail_count, retry_at"
BATCH_COLUMNS = (
    "id, scope_id, status, mode, reason, batch_from, batch_to, first_id, last_id, evidence_ids, "
    "size, observations, proposed, written, failures_before, error, started_at, finished_at"
)


@dataclass(frozen=True)
class BatchRow:
    id: int
    scope_id: str
    status: str
    mode: str
    batch_to: datetime
    last_id: str
    evidence_ids: tuple[str, ...]
    observations: tuple[Proposed, ...]
    failures_before: int


def batch_view(r: Any) -> dict[str, Any]:
    data = dict(r)
    data["evidence_ids"] = list(data["evidence_ids"])
    data["observations"] = from_json(data["observations"])
    for key in ("batch_from", "batch_to", "started_at", "finished_at"):
        data[key] = data[key].isoformat() if data[key] else None
    return data


def _batch_row(r: Any) -> BatchRow:
    found = from_json(r["observations"]) or []
    return BatchRow(
        r["id"],
        r["scope_id"],
        r["status"],
        r["mode"],
        r["batch_to"],
        r["last_id"],
        tuple(r["evidence_ids"]),
        tuple(Proposed.from_json(o) for o in found),
        r["failures_before"],
    )


async def scope_state(conn: Conn, scope_id: str) -> ScopeState:
    """The scope's bookkeeping (created on first use), in one round trip."""
    r = await conn.fetchrow(
        "WITH created AS (INSERT INTO consolidator.scope_state (scope_id) VALUES ($1) "
        f"ON CONFLICT DO NOTHING RETURNING {STATE_COLUMNS}) SELECT * FROM created UNION ALL "
        f"SELECT {STATE_COLUMNS} FROM consolidator.scope_state WHERE scope_id = $1",
        scope_id,
    )
    return ScopeState(**dict(r))


@dataclass(frozen=True)
class Wake:
    """What a wake of the scope finds: its bookkeeping, whether a batch is open, and its
    undigested evidence and uncounted turns."""

    state: ScopeState
    open_batch: bool
    undigested: int
    turns: int


async def wake(conn: Conn, scope_id: str) -> Wake:
    """`scope_state`, `open_batch` and `counts` of one scope in one statement."""
    r = await conn.fetchrow(
        "WITH created AS (INSERT INTO consolidator.scope_state (scope_id) VALUES ($1) "
        f"ON CONFLICT DO NOTHING RETURNING {STATE_COLUMNS}), state AS (SELECT * FROM created "
        f"UNION ALL SELECT {STATE_COLUMNS} FROM consolidator.scope_state WHERE scope_id = $1) "
        "SELECT state.*, EXISTS (SELECT 1 FROM consolidator.batch WHERE scope_id = $1 "
        "AND status IN ('running', 'distilled')) AS open_batch, "
        f"(SELECT count(*) FROM consolidator.evidence WHERE {UNDIGESTED}) AS undigested, "
        "(SELECT count(*) FROM consolidator.turn WHERE scope_id = $1 AND counted_at IS NULL) "
        "AS turns FROM state",
        scope_id,
    )
    found = dict(r)
    counted = found.pop("open_batch"), int(found.pop("undigested")), int(found.pop("turns"))
    return Wake(ScopeState(**found), *counted)


async def counts(conn: Conn, state: ScopeState) -> tuple[int, int]:
    """(undigested evidence, turns not yet counted) of a scope."""
    r = await conn.fetchrow(
        f"SELECT (SELECT count(*) FROM consolidator.evidence WHERE {UNDIGESTED}) AS ev, "
        "(SELECT count(*) FROM consolidator.turn WHERE scope_id = $1 AND counted_at IS NULL) "
        "AS turns",
        state.scope_id,
    )
    return int(r["ev"]), int(r["turns"])


async def undigested(conn: Conn, state: ScopeState, limit: int) -> list[Evidence]:
    """The oldest `limit` undigested rows, in (observed_at, id) order."""
    found = await conn.fetch(
        f"SELECT {EVIDENCE_COLUMNS} FROM consolidator.evidence WHERE {UNDIGESTED} "
        "ORDER BY observed_at, id LIMIT $2",
        state.scope_id,
        limit,
    )
    return [evidence_row(r) for r in found]


async def reset_turns(conn: Conn, scope_id: str, now: datetime) -> None:
    await conn.execute(
        "UPDATE consolidator.turn SET counted_at = $2 WHERE scope_id = $1 AND counted_at IS NULL",
        scope_id,
        now,
    )


async def open_batch(conn: Conn, scope_id: str) -> BatchRow | None:
    r = await conn.fetchrow(
        f"SELECT {BATCH_COLUMNS} FROM consolidator.batch WHERE scope_id = $1 "
        "AND status IN ('running', 'distilled')",
        scope_id,
    )
    return _batch_row(r) if r else None


async def interrupt(conn: Conn, batch_id: int, now: datetime) -> None:
    await conn.execute(
        "UPDATE consolidator.batch SET status = 'interrupted', finished_at = $2, "
        "error = 'stopped before the model answered' WHERE id = $1",
        batch_id,
        now,
    )


async def start(
    conn: Conn, state: ScopeState, batch: Sequence[Evidence], reason: str, today: date
) -> int:
    """Open the batch's audit row and count the run against the day's cap."""
    batch_id = await conn.fetchval(
        "INSERT INTO consolidator.batch (scope_id, status, reason, batch_from, batch_to, "
        "first_id, last_id, evidence_ids, size, failures_before) "
        "VALUES ($1, 'running', $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
        state.scope_id,
        reason,
        state.watermark_at,
        batch[-1].observed_at,
        batch[0].id,
        batch[-1].id,
        [e.id for e in batch],
        len(batch),
        state.fail_count,
    )
    await conn.execute(
        "UPDATE consolidator.scope_state SET run_count = CASE WHEN run_day = $2 "
        "THEN run_count + 1 ELSE 1 END, run_day = $2, updated_at = now() WHERE scope_id = $1",
        state.scope_id,
        today,
    )
    return int(batch_id)


async def distilled(conn: Conn, batch_id: int, mode: str, observations: Sequence[Proposed]) -> None:
    await conn.execute(
        "UPDATE consolidator.batch SET status = 'distilled', mode = $2, observations = $3::jsonb "
        "WHERE id = $1",
        batch_id,
        mode,
        to_json([o.as_json() for o in observations]),
    )


async def succeeded(conn: Conn, row: BatchRow, proposed: int, written: int, now: datetime) -> None:
    """Close the batch, move the watermark to its latest observed time and write the run's
    `consolidate` audit entry (acp.md §12.3 step 10), in one transaction."""
    closed = await conn.fetchrow(
        "UPDATE consolidator.batch SET status = 'ok', proposed = $2, written = $3, "
        f"finished_at = $4, error = '' WHERE id = $1 RETURNING {BATCH_COLUMNS}",
        row.id,
        proposed,
        written,
        now,
    )
    payload = {"observations": written, **_described(closed)}
    await audit.append(
        conn, audit.Entry("consolidate", row.scope_id, ACTOR, OK_REASON, _target(row.id), payload)
    )
    await conn.execute(
        "UPDATE consolidator.evidence SET digested_at = $2 WHERE id = ANY($1::text[])",
        list(row.evidence_ids),
        now,
    )
    # The watermark only advances: a batch of late arrivals said earlier leaves it where it is.
    await conn.execute(
        f"UPDATE consolidator.scope_state SET watermark_at = CASE WHEN {_AHEAD} THEN $2 "
        f"ELSE watermark_at END, watermark_id = CASE WHEN {_AHEAD} THEN $3 ELSE watermark_id "
        "END, fail_count = 0, last_failure = NULL, retry_at = NULL, updated_at = now() "
        "WHERE scope_id = $1",
        row.scope_id,
        row.batch_to,
        row.last_id,
    )


@dataclass(frozen=True)
class Failure:
    error: str
    size: int
    at: datetime
    retry_at: datetime


async def failed(conn: Conn, batch_id: int, scope_id: str, f: Failure) -> None:
    """The batch failed: the watermark stays; the scope waits before the same items are tried."""
    closed = await conn.fetchrow(
        "UPDATE consolidator.batch SET status = 'failed', error = $2, finished_at = $3 "
        f"WHERE id = $1 RETURNING {BATCH_COLUMNS}",
        batch_id,
        f.error,
        f.at,
    )
    await stalled(conn, scope_id, f)
    payload = {"error": f.error, **_described(closed)}
    entry = audit.Entry("consolidate", scope_id, ACTOR, FAILED_REASON, _target(batch_id), payload)
    await audit.append(conn, entry)


def _target(batch_id: int) -> str:
    return f"batch:{batch_id}"


def _described(batch: Any) -> dict[str, Any]:
    """acp.md's batch descriptor for the `consolidate` audit entry."""
    return {
        "batchId": batch["id"],
        "batchSize": batch["size"],
        "failuresBefore": batch["failures_before"],
        "batchFrom": batch["batch_from"].isoformat() if batch["batch_from"] else "",
        "batchTo": batch["batch_to"].isoformat(),
        "batchFirstId": batch["first_id"],
        "batchLastId": batch["last_id"],
        "mode": batch["mode"],
    }


async def stalled(conn: Conn, scope_id: str, f: Failure) -> None:
    """Count one more consecutive failure of the scope and when to try again."""
    failure = to_json({"at": f.at.isoformat(), "batchSize": f.size, "error": f.error})
    await conn.execute(
        "UPDATE consolidator.scope_state SET fail_count = fail_count + 1, "
        "last_failure = $2::jsonb, retry_at = $3, updated_at = now() WHERE scope_id = $1",
        scope_id,
        failure,
        f.retry_at,
    )


async def note_error(conn: Conn, batch_id: int, error: str) -> None:
    await conn.execute("UPDATE consolidator.batch SET error = $2 WHERE id = $1", batch_id, error)


async def sweep(conn: Conn, daily_runs: int, everything: bool) -> list[str]:
    """Scopes to look at again without a new fact: failed or capped ones and open batches
    (all scopes after a start)."""
    found = await conn.fetch(
        "SELECT scope_id FROM consolidator.scope_state WHERE $1 OR fail_count > 0 "
        "OR run_count >= $2 OR scope_id IN (SELECT scope_id FROM consolidator.batch "
        "WHERE status IN ('running', 'distilled')) ORDER BY scope_id",
        everything,
        daily_runs,
    )
    return [str(r["scope_id"]) for r in found]


async def status(conn: Conn, scope_id: str) -> dict[str, Any]:
    state = await conn.fetchrow(
        "SELECT * FROM consolidator.scope_state WHERE scope_id = $1", scope_id
    )
    batches = await conn.fetch(
        f"SELECT {BATCH_COLUMNS} FROM consolidator.batch WHERE scope_id = $1 "
        "ORDER BY id DESC LIMIT 10",
        scope_id,
    )
    data = {k: v for k, v in dict(state or {}).items()}
    for key, value in data.items():
        if isinstance(value, datetime | date):
            data[key] = value.isoformat()
    data["last_failure"] = from_json(data.get("last_failure"))
    return {"state": data, "batches": [batch_view(b) for b in batches]}


async def batches_with(conn: Conn, evidence_id: str) -> list[dict[str, Any]]:
    found = await conn.fetch(
        f"SELECT {BATCH_COLUMNS} FROM consolidator.batch WHERE evidence_ids @> ARRAY[$1]::text[] "
        "ORDER BY id",
        evidence_id,
    )
    return [batch_view(b) for b in found]


async def position(conn: Conn, evidence_id: str) -> Position | None:
    """An evidence copy's state, digestibility and time beside its scope's watermark."""
    r = await conn.fetchrow(
        "SELECT e.id AS evidence_id, e.state, e.digestible, e.digested_at IS NOT NULL AS "
        "digested, e.observed_at, s.watermark_at, "
        "coalesce(s.watermark_id, '') AS watermark_id FROM consolidator.evidence e "
        "LEFT JOIN consolidator.scope_state s USING (scope_id) WHERE e.id = $1",
        evidence_id,
    )
    return Position(**dict(r)) if r else None
