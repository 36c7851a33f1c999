"""Ingestion state: what ingestion learned about sessions, and the consumer's checkpoint."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tavern_ledger.domain.extract import SessionFacts
from tavern_ledger.store import Conn
from tavern_ledger.stores.errors import UnknownSession
from tavern_ledger.stores.scope import resolve_scope


async def sessions(conn: Conn, session_ids: Iterable[str]) -> dict[str, SessionFacts]:
    found = await conn.fetch(
        "SELECT session_id, chat_id, session_type, parent_session_id FROM ledger.ingest_session "
        "WHERE session_id = ANY($1::text[])",
        list(set(session_ids)),
    )
    return {
        r["session_id"]: SessionFacts(
            r["session_id"], r["chat_id"], r["session_type"], r["parent_session_id"]
        )
        for r in found
    }


async def save_sessions(conn: Conn, facts: Sequence[SessionFacts]) -> None:
    if not facts:
        return
    await conn.execute(
        "INSERT INTO ledger.ingest_session (session_id, chat_id, session_type, parent_session_id)"
        " SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) "
        "ON CONFLICT (session_id) DO UPDATE SET chat_id = excluded.chat_id, "
        "session_type = excluded.session_type, parent_session_id = excluded.parent_session_id, "
        "updated_at = now()",
        [f.session_id for f in facts],
        [f.chat_id for f in facts],
        [f.session_type for f in facts],
        [f.parent_session_id for f in facts],
    )


async def advance_checkpoint(conn: Conn, consumer: str, stream_seq: int) -> None:
    """Move the consumer's checkpoint forward (never back: redeliveries arrive late)."""
    await conn.execute(
        "INSERT INTO ledger.ingest_checkpoint (consumer, stream_seq) VALUES ($1, $2) "
        "ON CONFLICT (consumer) DO UPDATE SET stream_seq = "
        "greatest(ledger.ingest_checkpoint.stream_seq, excluded.stream_seq), updated_at = now()",
        consumer,
        stream_seq,
    )


async def checkpoint(conn: Conn, consumer: str) -> int:
    found = await conn.fetchval(
        "SELECT stream_seq FROM ledger.ingest_checkpoint WHERE consumer = $1", consumer
    )
    return int(found or 0)


async def known_scope(conn: Conn, session_id: str) -> str | None:
    """The chat a session is bound to (the stores' session binding, `resolve_scope`), else its
    chat as ingestion saw it created; None while neither has seen the session."""
    try:
        return (await resolve_scope(conn, session_id)).chat
    except UnknownSession:
        pass
    found = await conn.fetchval(
        "SELECT chat_id FROM ledger.ingest_session WHERE session_id = $1", session_id
    )
    return str(found) if found else None


async def scope_of_session(conn: Conn, session_id: str) -> str:
    """The scope a session's evidence lives in: its chat, else (unknown yet) the session."""
    return await known_scope(conn, session_id) or session_id
