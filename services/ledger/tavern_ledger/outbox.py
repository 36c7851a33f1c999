"""The LEDGER outbox: facts are written with the rows they describe and deleted once published."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from tavern_ledger.domain.facts import OutboxRecord
from tavern_ledger.evidence import Conn


class Pending(NamedTuple):
    """A fact waiting in the outbox (a tuple: the relay reads thousands a second)."""

    id: int
    msg_id: str
    subject: str
    body: bytes


async def enqueue(conn: Conn, records: Sequence[OutboxRecord]) -> None:
    if not records:
        return
    await conn.execute(
        "INSERT INTO ledger.outbox (msg_id, subject, body) "
        "SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[])",
        [r.msg_id for r in records],
        [r.subject for r in records],
        [r.body for r in records],
    )


async def take(conn: Conn, limit: int) -> list[Pending]:
    """The oldest unpublished facts, in order, deleted in the caller's transaction: it
    publishes them before it commits, so a failed publish (or a crash) rolls the delete back
    and they wait for the next page. Other replicas skip the rows meanwhile. One statement
    where claiming and then deleting took two."""
    found = await conn.fetch(
        "DELETE FROM ledger.outbox WHERE id = ANY(ARRAY("
        "SELECT id FROM ledger.outbox ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED"
        ")) RETURNING id, msg_id, subject, body",
        limit,
    )
    return sorted((Pending(*r) for r in found), key=lambda p: p.id)
