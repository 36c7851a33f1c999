"""The outbox of LEDGER facts: staged in the change's transaction, published after commit.

A fact whose publish failed stays staged and is sent by a later flush; its `Nats-Msg-Id`
(derived from the change) makes a repeated send a no-op on the stream.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from tavern_events.ledger import MemoryChanged, VariableChanged
from tavern_events.union import encode, msg_id_for, subject_for
from tavern_ledger.scopes.bindings import Conn
from tavern_runtime.logs import get_logger
from tavern_runtime.pg import Pool

log = get_logger(__name__)

Publish = Callable[[str, bytes, str], Awaitable[None]]
"""`(subject, data, msg_id)`: a JetStream publish that returns once the stream acknowledged."""
Fact = MemoryChanged | VariableChanged
STALE_AFTER_S = 10.0
FLUSH_BATCH = 50


@dataclass(frozen=True)
class Staged:
    msg_id: str
    subject: str
    data: bytes


def staged(facts: Sequence[Fact]) -> list[Staged]:
    return [Staged(msg_id_for(f), subject_for(f), encode(f)) for f in facts]


async def stage(conn: Conn, rows: Sequence[Staged]) -> None:
    """Insert in the caller's transaction (a repeated id is the same fact: ignored)."""
    await conn.executemany(
        "INSERT INTO ledger.store_outbox (msg_id, subject, data) VALUES ($1, $2, $3) "
        "ON CONFLICT (msg_id) DO NOTHING",
        [(r.msg_id, r.subject, r.data) for r in rows],
    )


async def send(pool: Pool, publish: Publish, rows: Sequence[Staged]) -> int:
    """Publish `rows` in order and unstage each once acknowledged; stop at the first failure."""
    sent: list[str] = []
    try:
        for row in rows:
            await publish(row.subject, row.data, row.msg_id)
            sent.append(row.msg_id)
    except Exception as exc:  # the bus is away: the rows stay staged for a later flush
        log.warning("store_fact_publish_failed", pending=len(rows) - len(sent), error=repr(exc))
    if sent:
        async with pool.acquire() as conn:
            await conn.execute(
                "DELETE FROM ledger.store_outbox WHERE msg_id = ANY($1::text[])", sent
            )
    return len(sent)


async def flush(pool: Pool, publish: Publish, *, older_than_s: float = STALE_AFTER_S) -> int:
    """Send facts left staged by an earlier failed publish."""
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT msg_id, subject, data FROM ledger.store_outbox "
            "WHERE created_at < now() - make_interval(secs => $1) ORDER BY created_at LIMIT $2",
            older_than_s,
            FLUSH_BATCH,
        )
    if not rows:
        return 0
    return await send(pool, publish, [Staged(r["msg_id"], r["subject"], r["data"]) for r in rows])
