"""The history index behind `tavern_history_search`: one row per chat message, with its
CJK-aware tokens, keyed by (session, log seq) so every hit traces back to the log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from tavern_events import subjects
from tavern_events.envelope import SessionEvent
from tavern_events.message import UserMessage
from tavern_events.streams import SESSIONS
from tavern_projector.domain import chat, text
from tavern_projector.framework import Conn, Entry, Projection, Target, lock_redactions, rows_json

MESSAGE_FILTERS = (
    "tavern.session.*.user.message",
    "tavern.session.*.assistant.message",
)

Row = tuple[str, int, int, str, bool, str | None, object, str, list[str], bool]
NAMES = (
    "session_id",
    "seq",
    "stream_seq",
    "message_id",
    "is_user",
    "name",
    "ts",
    "text",
    "tokens",
    "redacted",
)
COLUMNS = ", ".join(NAMES)
INDEX_CHARS_MAX = 64_000
"""Only this much of a message is tokenised (twice the loop's input cap): tokenising is pure
Python on the projector's event loop, and a 2 MB message would stall every projection."""


def row_of(entry: Entry, event: SessionEvent, redacted: bool) -> Row | None:
    found = chat.chat_text(event)
    if found is None:
        return None
    is_user, body = found
    name = event.payload.name if isinstance(event, UserMessage) else None
    kept, tokens = ("", []) if redacted else (body, text.index_tokens(body[:INDEX_CHARS_MAX]))
    return (
        event.session_id,
        event.seq,
        entry.stream_seq,
        event.id,
        is_user,
        name,
        event.ts,
        kept,
        tokens,
        redacted,
    )


class HistoryProjection(Projection):
    name: ClassVar[str] = "history"
    version: ClassVar[int] = 1
    stream: ClassVar[str] = SESSIONS.name
    filters: ClassVar[tuple[str, ...]] = MESSAGE_FILTERS
    tables: ClassVar[tuple[str, ...]] = ("history",)

    async def apply(self, conn: Conn, entries: Sequence[Entry], target: Target) -> None:
        events = [(e, ev) for e in entries if (ev := e.session_event()) is not None]
        if not events:
            return
        await lock_redactions(conn, exclusive=False)
        redacted = await redacted_keys(conn, [(ev.session_id, ev.seq) for _, ev in events])
        rows = [
            row
            for e, ev in events
            if (row := row_of(e, ev, (ev.session_id, ev.seq) in redacted)) is not None
        ]
        if not rows:
            return
        table = target.table("history")  # every row in one statement, read by the row type
        await conn.execute(
            f"""INSERT INTO {table} ({COLUMNS})
                SELECT {COLUMNS} FROM jsonb_populate_recordset(NULL::{table}, $1::jsonb)
                ON CONFLICT (session_id, seq) DO NOTHING""",
            rows_json([dict(zip(NAMES, row, strict=True)) for row in rows]),
        )


async def redacted_keys(conn: Conn, keys: list[tuple[str, int]]) -> set[tuple[str, int]]:
    """Which (session, seq) of `keys` the ledger redacted."""
    rows = await conn.fetch(
        """SELECT r.session_id, r.seq FROM projector.redactions r
           JOIN unnest($1::text[], $2::int[]) AS k(session_id, seq)
             ON r.session_id = k.session_id AND r.seq = k.seq""",
        [k[0] for k in keys],
        [k[1] for k in keys],
    )
    return {(r["session_id"], r["seq"]) for r in rows}


def session_filter(session_id: str, filters: Sequence[str]) -> list[str]:
    """`filters` narrowed to one session (`tavern.session.*.x` -> `tavern.session.<sid>.x`)."""
    subjects.validate_id(session_id, what="session id")
    return [f.replace("tavern.session.*.", f"tavern.session.{session_id}.", 1) for f in filters]
