"""The archive: every SESSIONS message copied as stored (subject, headers, bytes), so
`tavern restore` can republish a lost stream with the same ids in the same order.

A redacted message stays (the log is the truth) but its row records the redaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import ClassVar

from nats.js.api import Header

from tavern_events import subjects
from tavern_events.streams import SESSIONS
from tavern_projector.framework import Conn, Entry, Projection, Target, lock_redactions

_TRANSPORT = ("Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp")


def peek(data: bytes) -> tuple[int | None, str | None]:
    """The envelope `seq` and `type` of stored bytes, without validating the event."""
    try:
        raw = json.loads(data)
    except ValueError:
        return None, None
    if not isinstance(raw, dict):
        return None, None
    seq, kind = raw.get("seq"), raw.get("type")
    return (seq if type(seq) is int else None), (kind if isinstance(kind, str) else None)


def row_of(entry: Entry) -> tuple[object, ...]:
    """The archive row of one stored message (headers without transport-only ones)."""
    headers = {k: v for k, v in entry.headers.items() if k not in _TRANSPORT}
    log_seq, event_type = peek(entry.data)
    return (
        entry.stream_seq,
        entry.subject,
        subjects.session_id_of(entry.subject),
        log_seq,
        headers.get(Header.MSG_ID.value),
        event_type,
        json.dumps(headers),
        entry.data,
        entry.stored_time(),
    )


def columns(rows: Sequence[tuple[object, ...]], width: int) -> list[list[object]]:
    """Rows turned into one list per column (the arrays `unnest` takes back apart)."""
    return [[row[index] for row in rows] for index in range(width)]


class ArchiveProjection(Projection):
    name: ClassVar[str] = "archive"
    version: ClassVar[int] = 1
    stream: ClassVar[str] = SESSIONS.name
    filters: ClassVar[tuple[str, ...]] = (subjects.SESSIONS_ALL,)
    tables: ClassVar[tuple[str, ...]] = ("session_events",)

    async def apply(self, conn: Conn, entries: Sequence[Entry], target: Target) -> None:
        await lock_redactions(conn, exclusive=False)
        table = target.table("session_events")
        # One statement for the whole batch: a row each was a third of the projector's
        # statements under load (bench/costsheet.py).
        await conn.execute(
            f"""INSERT INTO {table} (stream_seq, subject, session_id, log_seq, event_id,
                   event_type, headers, data, stored_at)
                SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[],
                   $5::text[], $6::text[], $7::jsonb[], $8::bytea[], $9::timestamptz[])
                ON CONFLICT (stream_seq) DO NOTHING""",
            *columns([row_of(e) for e in entries], 9),
        )
        await mark_redacted(conn, table, [e.stream_seq for e in entries])


async def mark_redacted(conn: Conn, table: str, stream_seqs: list[int]) -> None:
    """Record known redactions on freshly archived rows."""
    await conn.execute(
        f"""UPDATE {table} a SET redacted_at = r.redacted_at, redaction_reason = r.reason
            FROM projector.redactions r
            WHERE a.stream_seq = ANY($1::bigint[]) AND a.session_id = r.session_id
              AND a.log_seq = r.seq AND a.redacted_at IS NULL""",
        stream_seqs,
    )
