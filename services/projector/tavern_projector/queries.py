"""Read-side queries behind the projector's RPCs: Postgres reads, domain decisions."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from typing import Any

from tavern_projector.domain import activation, history, stformat
from tavern_projector.domain.activation import Book, Message, ScanSettings
from tavern_projector.domain.history import Scope, validated
from tavern_projector.domain.requests import (
    CHARACTER_FIELDS,
    PERSONA_FIELDS,
    TOTAL_CHARS_MAX,
    CharacterRequest,
    LoreRequest,
    SceneRequest,
    SessionsRequest,
    bounded,
)
from tavern_projector.errors import BadRequest, NotFound, NotYours
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

Pool = Any
LORE_CONTENT_MAX = 2000


# --- history --------------------------------------------------------------------------------------


async def history_search(pool: Pool, raw: Any) -> dict[str, Any]:
    request, tokens = history.parse_request(raw)
    async with pool.acquire() as conn:
        lineage = await _lineage(conn, request.session_id)
        chosen = history.scopes(request.session_id, lineage, request.parents)
        rows = await _history_rows(conn, chosen, tokens)
    return history.shape(rows, tokens, request)


async def _lineage(conn: Any, session_id: str) -> list[tuple[str, int]]:
    """[(parent, forked at seq), (grandparent, seq) ...] from the sessions read model."""
    found: list[tuple[str, int]] = []
    current = session_id
    while len(found) < history.PARENT_DEPTH_MAX:
        row = await conn.fetchrow(
            "SELECT parent_session_id, forked_at_seq FROM projector.sessions WHERE session_id = $1",
            current,
        )
        if row is None or row["parent_session_id"] is None:
            break
        found.append((row["parent_session_id"], row["forked_at_seq"]))
        current = row["parent_session_id"]
    return found


async def _history_rows(conn: Any, chosen: list[Scope], tokens: list[str]) -> list[history.Row]:
    rows = await conn.fetch(
        """SELECT h.session_id, h.seq, h.message_id, h.is_user, h.name, h.ts, h.text,
                  c.chat_key, c.character, c.user_name
           FROM projector.history h
           JOIN unnest($1::text[], $2::int[], $3::int[]) AS s(session_id, max_seq, depth)
             ON h.session_id = s.session_id AND (s.max_seq IS NULL OR h.seq <= s.max_seq)
           LEFT JOIN projector.chats c ON c.session_id = h.session_id
           WHERE h.tokens @> $4::text[] AND NOT h.redacted
           ORDER BY s.depth, h.seq DESC
           LIMIT $5""",
        [s.session_id for s in chosen],
        [s.max_seq for s in chosen],
        [s.depth for s in chosen],
        tokens,
        history.SCAN_CAP,
    )
    return [_history_row(r) for r in rows]


def _history_row(r: Any) -> history.Row:
    default = r["user_name"] if r["is_user"] else r["character"]
    return history.Row(
        r["session_id"],
        r["seq"],
        r["message_id"],
        r["chat_key"] or r["session_id"],
        r["name"] or default or ("User" if r["is_user"] else "Assistant"),
        r["is_user"],
        r["ts"],
        r["text"],
    )


# --- characters and personas ----------------------------------------------------------------------


async def character_get(pool: Pool, raw: Any, owner: str | None = None) -> dict[str, Any]:
    """A character's or persona's fields: one of `owner`'s (any owner's for None)."""
    request: CharacterRequest = validated(CharacterRequest, raw)
    allowed = CHARACTER_FIELDS if request.kind == "character" else PERSONA_FIELDS
    unknown = [f for f in request.fields if f not in allowed]
    if unknown:
        raise BadRequest(f"fields: unknown field {unknown[0]!r}; known: {', '.join(allowed)}")
    async with pool.acquire() as conn:
        row = await _asset_row(conn, request, owner)
    content = _json(row["content"])
    values = _character_values(content) if request.kind == "character" else content
    return _fields_reply(request, row, values)


async def _asset_row(conn: Any, request: CharacterRequest, owner: str | None) -> Any:
    """The asset named by id or name, the asker's first; another owner's is `not_found`
    exactly like one that does not exist (logged as a refusal), so nothing says it exists."""
    table = "characters" if request.kind == "character" else "personas"
    avatar = "file_stem" if request.kind == "character" else "NULL AS file_stem"
    bound = await _bound_asset(conn, request)
    wanted = request.character or (bound[0] if bound else None)
    if wanted is None:
        raise BadRequest("character: give a character (id or name) or a session with one")
    visible = bound[1] if bound and not request.character else owner
    row = await conn.fetchrow(
        f"""SELECT asset_id, name, content, content_hash, {avatar}, owner FROM projector.{table}
            WHERE asset_id = $1 OR lower(name) = lower($1)
            ORDER BY ($2::text IS NULL OR owner = $2) DESC, asset_id = $1 DESC LIMIT 1""",
        wanted,
        visible,
    )
    if row is None:
        raise NotFound(f"no {request.kind} {wanted!r}")
    if visible is not None and row["owner"] != visible:
        raise NotYours(f"no {request.kind} {wanted!r}", wanted)
    return row


async def _bound_asset(conn: Any, request: CharacterRequest) -> tuple[str, str] | None:
    """The session's character (or persona) and the session's owner, whose it must be."""
    if request.session_id is None:
        return None
    column = "character_id" if request.kind == "character" else "persona_id"
    found = await conn.fetchrow(
        f"SELECT {column} AS asset, owner FROM projector.sessions WHERE session_id = $1",
        request.session_id,
    )
    if found is None or found["asset"] is None:
        return None
    return str(found["asset"]), str(found["owner"])


def _character_values(content: dict[str, Any]) -> dict[str, Any]:
    data = dict(content.get("data") or {})
    summary = ((data.get("extensions") or {}).get("agentTavern") or {}).get("identitySummary")
    data["identity_summary"] = summary or ""
    return data


def _fields_reply(request: CharacterRequest, row: Any, values: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    truncated, budget = False, TOTAL_CHARS_MAX
    for name in request.fields:
        value = values.get(name, "")
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        cut, was_cut = bounded(text, min(request.max_chars, max(budget, 1)))
        budget -= len(cut)
        truncated = truncated or was_cut
        fields[name] = cut if isinstance(value, str) or was_cut else value
    return {
        "kind": request.kind,
        "name": row["name"],
        "fields": fields,
        "truncated": truncated,
        "avatar": _avatar(request, row),
        "source": {
            "kind": f"tavern-{request.kind}",
            "id": row["asset_id"],
            "hash": row["content_hash"],
            "owner": row["owner"],
        },
    }


def _avatar(request: CharacterRequest, row: Any) -> str | None:
    """The card's file in SillyTavern's layout (as `tavern st export` names it)."""
    if request.kind != "character":
        return None
    return f"{row['file_stem'] or stformat.safe_name(str(row['name']), 'character')}.png"


def _json(value: Any) -> dict[str, Any]:
    found = json.loads(value) if isinstance(value, str) else value
    return found if isinstance(found, dict) else {}


# --- lore -----------------------------------------------------------------------------------------


async def lore_search(pool: Pool, raw: Any, owner: str | None = None) -> dict[str, Any]:
    """Activated lore from the books asked for and the session's character's: `owner`'s only
    (any owner's for None); the session's character's books are its owner's."""
    request: LoreRequest = validated(LoreRequest, raw)
    async with pool.acquire() as conn:
        books = await _books(conn, request, owner)
        chat = await _scan_messages(conn, request)
        last_seq = await _last_seq(conn, request.session_id)
    chat = [*chat, Message("", request.query)] if request.query.strip() else chat
    settings = ScanSettings(
        scan_depth=request.scan_depth + (1 if request.query.strip() else 0),
        token_budget=request.max_tokens,
        case_sensitive=request.case_sensitive,
        match_whole_words=request.match_whole_words,
        recursive=request.recursive,
        max_recursion_steps=request.max_recursion_steps,
        truncate_over_budget=request.truncate,
        message_count=request.message_count,
        past=tuple((a.at, a.ids) for a in request.activations),
    )
    seed = request.seed if request.seed is not None else _seed(request.session_id, last_seq)
    outcome = activation.activate(books, chat, settings, random.Random(seed).random)
    return _lore_reply(outcome, books, request, seed)


async def _books(conn: Any, request: LoreRequest, owner: str | None) -> list[Book]:
    """The books asked for, the session's character's, and each character's linked world
    (`data.extensions.world`), for a character given by id as much as through the session.
    Only one owner's assets are read: the asker's, or the session's owner's for its own."""
    wanted, session_owner = list(request.books), owner
    if request.session_id is not None:
        bound = await conn.fetchrow(
            """SELECT c.asset_id, s.owner FROM projector.sessions s
               JOIN projector.characters c ON c.owner = s.owner AND (c.asset_id = s.character_id
                 OR lower(c.name) = lower(s.character_id))
               WHERE s.session_id = $1 ORDER BY c.asset_id = s.character_id DESC LIMIT 1""",
            request.session_id,
        )
        if bound is not None:
            wanted.append(str(bound["asset_id"]))
            session_owner = owner or str(bound["owner"])
    if owner is not None:
        await _log_others(conn, request.books, owner)
    return await _owned_books(conn, wanted, session_owner)


async def _owned_books(conn: Any, wanted: list[str], owner: str | None) -> list[Book]:
    characters = await conn.fetch(
        """SELECT content FROM projector.characters
           WHERE asset_id = ANY($1::text[]) AND ($2::text IS NULL OR owner = $2)""",
        wanted,
        owner,
    )
    for character in characters:
        world = ((_json(character["content"]).get("data") or {}).get("extensions") or {}).get(
            "world"
        )
        if isinstance(world, str) and world:
            wanted.append(world)
    rows = await conn.fetch(
        """SELECT asset_id, name, book FROM projector.lorebooks
           WHERE (asset_id = ANY($1::text[]) OR owner_id = ANY($1::text[])
              OR lower(name) = ANY($2::text[])) AND ($3::text IS NULL OR owner = $3)
           ORDER BY asset_id""",
        wanted,
        [w.lower() for w in wanted],
        owner,
    )
    return [Book.of(_json(r["book"])) for r in rows]


async def _log_others(conn: Any, named: Sequence[str], owner: str) -> None:
    """A book named that only another user holds is left out like an unknown one; the
    refusal is logged."""
    if not named:
        return
    others = await conn.fetch(
        """SELECT DISTINCT asset_id FROM projector.lorebooks
           WHERE (asset_id = ANY($1::text[]) OR lower(name) = ANY($2::text[]))
             AND owner <> $3 LIMIT 10""",
        named,
        [n.lower() for n in named],
        owner,
    )
    if others:
        log.warning(
            "access_refused",
            rpc="lore.search",
            user=owner,
            code="not_found",
            books=[r["asset_id"] for r in others],
            reason="the lorebooks belong to another user",
        )


async def _scan_messages(conn: Any, request: LoreRequest) -> list[Message]:
    if request.messages is not None:
        return [Message(m.name, m.text) for m in request.messages]
    if request.session_id is None:
        return []
    rows = await conn.fetch(
        """SELECT h.is_user, h.name, h.text, c.character, c.user_name
           FROM projector.history h LEFT JOIN projector.chats c ON c.session_id = h.session_id
           WHERE h.session_id = $1 AND NOT h.redacted ORDER BY h.seq DESC LIMIT $2""",
        request.session_id,
        max(request.scan_depth, 1) * 2 + 10,
    )
    return [Message(_speaker(r), r["text"]) for r in reversed(rows)]


def _speaker(r: Any) -> str:
    return str(r["name"] or (r["user_name"] if r["is_user"] else r["character"]) or "")


async def _last_seq(conn: Any, session_id: str | None) -> int:
    if session_id is None:
        return 0
    found = await conn.fetchval(
        "SELECT last_seq FROM projector.sessions WHERE session_id = $1", session_id
    )
    return int(found or 0)


def _seed(session_id: str | None, last_seq: int) -> int:
    """Same session, same log position: same rolls (probability and group picks)."""
    digest = hashlib.sha256(f"{session_id or ''}#{last_seq}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _lore_reply(
    outcome: activation.Outcome, books: list[Book], request: LoreRequest, seed: int
) -> dict[str, Any]:
    shown = outcome.activated[: request.limit]
    return {
        "entries": [_lore_entry(a, books) for a in shown],
        "usedTokens": outcome.used_tokens,
        "budget": outcome.budget,
        "dropped": dict(list(outcome.dropped.items())[:50]),
        "sourceCount": len(outcome.activated),
        "truncated": len(outcome.activated) > len(shown),
        "seed": seed,
    }


def _lore_entry(item: activation.Activated, books: list[Book]) -> dict[str, Any]:
    entry = item.candidate.entry
    content, cut = bounded(item.content, LORE_CONTENT_MAX)
    return {
        "id": item.candidate.entry_id,
        "book": books[item.candidate.book].name,
        "uid": entry["uid"],
        "comment": entry["comment"],
        "content": content,
        "position": entry["position"],
        "order": entry["order"],
        "depth": entry["depth"],
        "role": entry["role"],
        "reason": item.reason,
        "tokens": item.tokens,
        "truncated": cut or item.truncated,
    }


# --- scene and sessions ---------------------------------------------------------------------------


async def scene_get(pool: Pool, raw: Any) -> dict[str, Any]:
    request: SceneRequest = validated(SceneRequest, raw)
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            """SELECT s.*, c.chat_key, c.character, c.user_name, c.message_count, c.status,
                      ch.content AS card
               FROM projector.sessions s
               LEFT JOIN projector.chats c ON c.session_id = s.session_id
               LEFT JOIN projector.characters ch ON ch.asset_id = s.character_id
                 AND ch.owner = s.owner
               WHERE s.session_id = $1""",
            request.session_id,
        )
    if row is None:
        raise NotFound(f"no session {request.session_id!r}")
    return _scene(row, request)


def _scene(row: Any, request: SceneRequest) -> dict[str, Any]:
    card = _json(row["card"]) if row["card"] is not None else {}
    data = card.get("data") or {}
    scenario, cut = bounded(str(data.get("scenario") or ""), request.max_chars)
    return {
        "session_id": row["session_id"],
        "character": row["character"] or data.get("name"),
        "user": row["user_name"],
        "chat": row["chat_key"],
        "chatId": row["chat_id"],
        "architecture": row["architecture"],
        "contextMode": row["context_mode"],
        "scenario": scenario,
        "messageCount": row["message_count"] or 0,
        "turns": row["turns"],
        "lastActivity": row["last_activity"].isoformat() if row["last_activity"] else None,
        "needsRepair": row["status"] == "needs_repair",
        "group": None,
        "source": {"kind": "tavern-scene", "id": row["session_id"]},
        "truncated": cut,
    }


SESSION_COLUMNS = """s.session_id, s.architecture, s.context_mode, s.chat_id, s.character_id,
    s.parent_session_id, s.turns, s.turns_completed, s.turns_cancelled, s.turns_failed,
    s.open_turn, s.prompt_tokens, s.completion_tokens, s.total_tokens, s.created_at,
    s.last_activity, s.last_seq, s.owner, COALESCE(c.status, 'ok') AS chat_status, c.chat_key,
    c.error, c.edited_outside_at"""


async def sessions_list(pool: Pool, raw: Any, owner: str | None = None) -> dict[str, Any]:
    """The most recently active sessions (of `owner` only, unless None)."""
    request: SessionsRequest = validated(SessionsRequest, raw)
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            f"""SELECT {SESSION_COLUMNS} FROM projector.sessions s
                LEFT JOIN projector.chats c ON c.session_id = s.session_id
                WHERE $2::text IS NULL OR s.owner = $2
                ORDER BY s.last_activity DESC NULLS LAST LIMIT $1""",
            request.limit,
            owner,
        )
    return {"sessions": [_session(r) for r in rows]}


def _session(r: Any) -> dict[str, Any]:
    found = dict(r)
    for key in ("created_at", "last_activity", "edited_outside_at"):
        found[key] = found[key].isoformat() if found[key] else None
    found["needs_repair"] = found.pop("chat_status") == "needs_repair"
    return found
