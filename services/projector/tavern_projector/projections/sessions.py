"""The sessions read model (`tavern sessions`): one row per session, folded from its log."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any, ClassVar

from tavern_events.streams import SESSIONS
from tavern_projector.domain.sessions import OUTCOMES, SessionSummary, apply
from tavern_projector.framework import Conn, Entry, Projection, Target, rows_json

FILTERS = (
    "tavern.session.*.session.>",
    "tavern.session.*.turn.start",
    "tavern.session.*.turn.end",
    "tavern.session.*.user.message",
    "tavern.session.*.assistant.message",
)
COLUMNS = [f.name for f in fields(SessionSummary) if f.name != "outcomes"] + [
    f"turns_{o}" for o in OUTCOMES
]


def summary_of(row: Any) -> SessionSummary:
    values = {name: row[name] for name in COLUMNS if not name.startswith("turns_")}
    summary = SessionSummary(**values)
    summary.outcomes = {o: row[f"turns_{o}"] for o in OUTCOMES}
    return summary


def values_of(summary: SessionSummary) -> list[Any]:
    plain = [getattr(summary, name) for name in COLUMNS if not name.startswith("turns_")]
    return plain + [summary.outcomes.get(o, 0) for o in OUTCOMES]


class SessionsProjection(Projection):
    name: ClassVar[str] = "sessions"
    version: ClassVar[int] = 1
    stream: ClassVar[str] = SESSIONS.name
    filters: ClassVar[tuple[str, ...]] = FILTERS
    tables: ClassVar[tuple[str, ...]] = ("sessions",)

    async def apply(self, conn: Conn, entries: Sequence[Entry], target: Target) -> None:
        events = [ev for e in entries if (ev := e.session_event()) is not None]
        if not events:
            return
        table = target.table("sessions")
        states = await self._load(conn, table, sorted({ev.session_id for ev in events}))
        for event in events:
            apply(states.setdefault(event.session_id, SessionSummary(event.session_id)), event)
        await self._save(conn, table, list(states.values()))

    async def _load(self, conn: Conn, table: str, ids: list[str]) -> dict[str, SessionSummary]:
        rows = await conn.fetch(f"SELECT * FROM {table} WHERE session_id = ANY($1::text[])", ids)
        return {r["session_id"]: summary_of(r) for r in rows}

    async def _save(self, conn: Conn, table: str, states: list[SessionSummary]) -> None:
        """Every session's row in one statement (the table's own row type reads the JSON)."""
        names = ", ".join(COLUMNS)
        updates = ", ".join(f"{n} = EXCLUDED.{n}" for n in COLUMNS if n != "session_id")
        rows = [dict(zip(COLUMNS, values_of(s), strict=True)) for s in states]
        await conn.execute(
            f"""INSERT INTO {table} ({names})
                SELECT {names} FROM jsonb_populate_recordset(NULL::{table}, $1::jsonb)
                ON CONFLICT (session_id) DO UPDATE SET {updates}""",
            rows_json(rows),
        )
