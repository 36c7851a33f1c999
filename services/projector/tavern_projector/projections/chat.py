"""The chat projection: SillyTavern JSONL files under `<data dir>/chats`, one per session;
group chats in `group chats/` beside it with their groups' definitions in `groups/`.

Files are rewritten whole and atomically; `projector.chats` records which session writes
which file, its revision and its status. A file someone else changed since it was written here
(SillyTavern re-saving it with another swipe chosen, an edited or deleted message, new
`chat_metadata`) is never overwritten: the projector reads it back and continues it as it
found it, and the chat's row records when (`edited_outside_at`). Such edits are the file's
only: the session log, and what the model sees, keep the lines as they were.

A chat whose projection fails is marked `needs_repair` and left alone (the session is never
blocked); `tavern repair` rebuilds it from the log. A redelivered event is recognised by the
log seq in `extra.agentTavern`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any, ClassVar

from tavern_events.envelope import SessionEvent
from tavern_events.group import GroupBinding
from tavern_events.session import SessionCreated
from tavern_events.streams import SESSIONS
from tavern_projector.chatfiles import ChatFiles, sibling, swap_all
from tavern_projector.chatfiles import revision as file_revision
from tavern_projector.domain import chat, groupdef, stformat
from tavern_projector.domain.chat import ChatBinding, ChatState
from tavern_projector.domain.groupdef import GROUPS, Card, GroupChat
from tavern_projector.framework import Conn, Entry, Projection, Target, lock_redactions
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

FILTERS = (
    "tavern.session.*.session.>",
    "tavern.session.*.agent.request",
    "tavern.session.*.user.message",
    "tavern.session.*.assistant.message",
    "tavern.session.*.chat.>",
    "tavern.session.*.group.>",
)
CACHE_SIZE = 256
FLUSH_EVERY = 256


@dataclass(frozen=True)
class Names:
    """Names used when a session's binding does not resolve to an asset."""

    character: str = "Assistant"
    user: str = "User"


@dataclass
class Cached:
    state: ChatState
    created_at: datetime
    revision: str | None
    dirty: bool = False
    failed: str | None = None
    stat: tuple[int, int] | None = None
    """The file as written here last (mtime ns, size); another one means someone else wrote."""
    edited_outside: bool = False


class ChatProjection(Projection):
    name: ClassVar[str] = "chat"
    version: ClassVar[int] = 1
    stream: ClassVar[str] = SESSIONS.name
    filters: ClassVar[tuple[str, ...]] = FILTERS
    tables: ClassVar[tuple[str, ...]] = ("chats",)

    def __init__(self, tz: tzinfo, names: Names = Names(), *, flush_every: int = 1) -> None:
        self.tz, self.names, self.flush_every = tz, names, flush_every
        self.cache: OrderedDict[str, Cached] = OrderedDict()
        self.skipped: set[str] = set()

    # -- applying ----------------------------------------------------------------------------------

    async def apply(self, conn: Conn, entries: Sequence[Entry], target: Target) -> None:
        events = [ev for e in entries if (ev := e.session_event()) is not None]
        if not events:
            return
        await lock_redactions(conn, exclusive=False)
        by_session: dict[str, list[SessionEvent]] = {}
        for event in events:
            by_session.setdefault(event.session_id, []).append(event)
        await self._refresh(conn, target, list(by_session))
        for session_id, batch in by_session.items():
            await self._apply_session(conn, target, session_id, batch)
        if sum(c.dirty for c in self.cache.values()) >= self.flush_every:
            await self.finish(conn, target)

    async def _apply_session(
        self, conn: Conn, target: Target, session_id: str, events: list[SessionEvent]
    ) -> None:
        if session_id in self.skipped:
            return
        try:
            cached = self._cached(target, session_id)
            if cached is None:
                async with conn.transaction():  # a savepoint: a failed load leaves the batch usable
                    cached = await self._state(conn, target, events[0])
                    self._fold(cached, events)
            else:  # no statement runs: a failure here leaves the transaction usable as it is
                self.cache.move_to_end(session_id)
                self._fold(cached, events)
        except Exception as exc:
            log.error("chat_projection_failed", session_id=session_id, error=repr(exc))
            await self._mark(conn, target, session_id, events[0].seq, repr(exc))

    def _fold(self, cached: Cached, events: list[SessionEvent]) -> None:
        for event in events:
            chat.apply(cached.state, event, self.tz)
        cached.dirty = True

    async def finish(self, conn: Conn, target: Target) -> None:
        """Write every changed chat, then its row (inside the batch's transaction)."""
        files = ChatFiles(target.chats_dir, durable=not target.shadow)
        dirty = [(sid, cached) for sid, cached in self.cache.items() if cached.dirty]
        rendered = [(cached.state.binding.key, cached.state.render()) for _, cached in dirty]
        pairs = zip(dirty, rendered, strict=True)
        same = [_unchanged(files, cached, data) for (_, cached), (_, data) in pairs]
        changed = [r for r, unchanged in zip(rendered, same, strict=True) if not unchanged]
        written = iter(await files.write_all(changed))
        saved: list[Cached] = []
        for (session_id, cached), unchanged in zip(dirty, same, strict=True):
            revision = cached.revision if unchanged else next(written)
            if isinstance(revision, OSError):  # this chat waits for repair; the others go on
                log.error("chat_write_failed", session_id=session_id, error=repr(revision))
                await self._mark(conn, target, session_id, cached.state.last_seq, repr(revision))
                continue
            cached.revision, cached.dirty = revision, False
            if not unchanged:
                cached.stat = files.stat(cached.state.binding.key)
            if cached.state.moved_from is not None:  # an import renamed the chat's folder
                files.remove(cached.state.moved_from)
                cached.state.moved_from = None
            saved.append(cached)
        await save_rows(conn, target, saved)
        groups = {c.state.binding.group_file for _, c in dirty if c.state.binding.group_file}
        for group_id in sorted(groups):
            await write_definition(conn, target, group_id)
        while len(self.cache) > CACHE_SIZE:
            self.cache.popitem(last=False)

    async def _mark(
        self, conn: Conn, target: Target, session_id: str, seq: int, error: str
    ) -> None:
        self.cache.pop(session_id, None)
        self.skipped.add(session_id)
        await mark_needs_repair(conn, target.table("chats"), session_id, seq, error)

    # -- loading -----------------------------------------------------------------------------------

    async def _refresh(self, conn: Conn, target: Target, session_ids: list[str]) -> None:
        """Drop cached chats another writer changed; note chats waiting for repair."""
        rows = await conn.fetch(
            f"SELECT session_id, revision, status FROM {target.table('chats')}"
            " WHERE session_id = ANY($1::text[])",
            session_ids,
        )
        for row in rows:
            cached = self.cache.get(row["session_id"])
            if row["status"] != "ok":
                self.skipped.add(row["session_id"])
            elif cached is not None and not cached.dirty and cached.revision != row["revision"]:
                del self.cache[row["session_id"]]
            else:
                self.skipped.discard(row["session_id"])

    def _cached(self, target: Target, session_id: str) -> Cached | None:
        """The cached chat, unless its file was changed outside since (then it is dropped)."""
        cached = self.cache.get(session_id)
        if cached is not None and self._edited_outside(target, cached):
            log.warning("chat_edited_outside", session_id=session_id)
            del self.cache[session_id]
            cached = None
        return cached

    async def _state(self, conn: Conn, target: Target, first: SessionEvent) -> Cached:
        session_id = first.session_id
        cached = self._cached(target, session_id)
        if cached is None:
            cached = await self.load(conn, target, session_id) or await self._create(
                conn, target, first
            )
            self.cache[session_id] = cached
        self.cache.move_to_end(session_id)
        return cached

    def _edited_outside(self, target: Target, cached: Cached) -> bool:
        if cached.stat is None or cached.dirty:
            return False
        return ChatFiles(target.chats_dir).stat(cached.state.binding.key) != cached.stat

    async def load(self, conn: Conn, target: Target, session_id: str) -> Cached | None:
        """A chat from its row and file (None if the session has no chat yet)."""
        row = await conn.fetchrow(
            f"SELECT * FROM {target.table('chats')} WHERE session_id = $1", session_id
        )
        if row is None:
            return None
        binding = binding_of(row)
        data = ChatFiles(target.chats_dir).read(binding.key)
        if data is None:
            if row["message_count"]:
                raise FileNotFoundError(f"chat file {binding.key}.jsonl is missing")
            state = chat.new_chat(binding, row["created_at"], self.tz)
        else:
            state = chat.read_file(binding, data, _json(row["chat_header"]))
            state.last_seq = max(state.last_seq, row["last_seq"] or 0)  # deleted lines stay so
        state.gen_started = row["gen_started"]
        state.redacted = await redacted_seqs(conn, session_id)
        edited = data is not None and file_revision(data) != row["revision"]
        if edited:
            log.warning("chat_edited_outside", session_id=session_id, key=binding.key)
        return Cached(state, row["created_at"], row["revision"], edited_outside=edited)

    async def _create(self, conn: Conn, target: Target, first: SessionEvent) -> Cached:
        binding = await self._binding(conn, first)
        copied = await self._fork_lines(conn, target, binding)
        state = chat.new_chat(binding, first.ts, self.tz, copied)
        state.redacted = await redacted_seqs(conn, first.session_id)
        return Cached(state, first.ts, None, dirty=True)

    async def _binding(self, conn: Conn, first: SessionEvent) -> ChatBinding:
        if not isinstance(first, SessionCreated):
            log.warning("chat_without_created", session_id=first.session_id, seq=first.seq)
            return ChatBinding(
                first.session_id, first.session_id, self.names.character, self.names.user
            )
        p = first.payload
        card = await character_row(conn, p.character_id, p.owner)
        character = (card["name"] if card else None) or self.names.character
        user = await asset_name(conn, "personas", p.persona_id, p.owner) or self.names.user
        return ChatBinding(
            first.session_id,
            p.chat_id,
            character,
            user,
            p.architecture,
            p.context_mode,
            p.parent_session_id,
            p.forked_at_seq,
            card["file_stem"] if card else None,
            p.group,
            groupdef.file_id(p.group.group_id, p.owner) if p.group else None,
        )

    async def _fork_lines(
        self, conn: Conn, target: Target, binding: ChatBinding
    ) -> list[dict[str, Any]]:
        parent_id, at_seq = binding.parent_session_id, binding.forked_at_seq
        if parent_id is None or at_seq is None:
            return []
        parent = self.cache.get(parent_id) or await self.load(conn, target, parent_id)
        return chat.fork_lines(parent.state, at_seq) if parent is not None else []

    # -- rebuilds ----------------------------------------------------------------------------------

    async def forget_sessions(self, conn: Conn, target: Target, session_ids: Sequence[str]) -> None:
        rows = await conn.fetch(
            f"DELETE FROM {target.table('chats')} WHERE session_id = ANY($1::text[])"
            " RETURNING chat_key, edited_outside_at, group_id",
            list(session_ids),
        )
        files = ChatFiles(target.chats_dir)
        for row in rows:
            if row["edited_outside_at"] is not None and row["chat_key"]:
                files.keep_aside(row["chat_key"], _stamp(row["edited_outside_at"]))
            files.remove(row["chat_key"])
        for group_id in sorted({r["group_id"] for r in rows if r["group_id"]}):
            await write_definition(conn, target, group_id)
        for session_id in session_ids:
            self.cache.pop(session_id, None)
            self.skipped.discard(session_id)

    async def prepare_shadow(self, conn: Conn, target: Target) -> None:
        await super().prepare_shadow(conn, target)
        ChatFiles(target.chats_dir).clear()

    async def swap(self, conn: Conn, shadow: Target) -> None:
        await keep_edited(conn, shadow.as_live(), shadow)
        os.sync()  # the shadow's files were written without an fsync each
        await super().swap(conn, shadow)
        self.old_dirs = swap_all(shadow.as_live().chats_dir, shadow.chats_dir)

    async def after_swap(self, shadow: Target) -> None:
        for old in getattr(self, "old_dirs", [shadow.chats_dir]):
            shutil.rmtree(old, ignore_errors=True)


async def keep_edited(conn: Conn, live: Target, shadow: Target) -> None:
    """Before a rebuild replaces the chats: every file edited outside, and every one kept aside
    before, goes into the new directory aside (a rebuild writes the log's lines only)."""
    rows = await conn.fetch(
        f"SELECT chat_key, edited_outside_at FROM {live.table('chats')}"
        " WHERE edited_outside_at IS NOT NULL AND chat_key <> ''"
    )
    old, new = ChatFiles(live.chats_dir), ChatFiles(shadow.chats_dir)
    for row in rows:
        if old.keep_aside(row["chat_key"], _stamp(row["edited_outside_at"]), new) is not None:
            log.warning("edited_chat_kept_aside", chat_key=row["chat_key"])
    for relative in old.asides():
        target = new.located(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(old.located(relative), target)


def _stamp(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%d@%Hh%Mm%Ss")


# --- rows -----------------------------------------------------------------------------------------


def binding_of(row: Any) -> ChatBinding:
    folder = str(row["chat_key"] or "").rpartition("/")[0]
    group = _json(row["group_binding"])
    return ChatBinding(
        row["session_id"],
        row["chat_id"],
        row["character"],
        row["user_name"],
        row["architecture"],
        row["context_mode"],
        row["parent_session_id"],
        row["forked_at_seq"],
        folder or None,
        GroupBinding.model_validate(group) if group else None,
        row["group_id"],
    )


def _json(value: Any) -> dict[str, Any] | None:
    found = json.loads(value) if isinstance(value, str) else value
    return found if isinstance(found, dict) else None


async def write_definition(conn: Conn, target: Target, group_id: str) -> None:
    """Write `groups/<group id>.json` from every chat of the group (none left: remove it);
    `group_id` is the definition's (`groupdef.file_id`: one owner's chats of the group)."""
    rows = await conn.fetch(
        f"SELECT chat_id, group_binding, chat_header FROM {target.table('chats')}"
        " WHERE group_id = $1 AND group_binding IS NOT NULL ORDER BY created_at, session_id",
        group_id,
    )
    path = sibling(target.chats_dir, GROUPS) / f"{group_id}.json"
    if not rows:
        path.unlink(missing_ok=True)
        return
    chats = [
        GroupChat(
            r["chat_id"],
            GroupBinding.model_validate(_json(r["group_binding"])),
            dict((_json(r["chat_header"]) or {}).get("chat_metadata") or {}),
        )
        for r in rows
    ]
    members = sorted({m for c in chats for m in c.group.member_ids()})
    cards = await conn.fetch(
        "SELECT asset_id, name, file_stem FROM projector.characters WHERE asset_id = ANY($1)",
        members,
    )
    by_id = {
        c["asset_id"]: Card(
            f"{c['file_stem'] or stformat.safe_name(c['name'], 'character')}.png", c["name"]
        )
        for c in cards
    }
    found = groupdef.definition(chats, by_id, group_id)
    ChatFiles(target.chats_dir, durable=not target.shadow).write_path(path, groupdef.render(found))


def _unchanged(files: ChatFiles, cached: Cached, data: bytes) -> bool:
    """Whether the file already holds `data` as written here last (an event that changes only
    the row, such as a generation starting): then it is not rewritten."""
    return (
        cached.revision is not None
        and cached.stat is not None
        and cached.state.moved_from is None
        and file_revision(data) == cached.revision
        and files.stat(cached.state.binding.key) == cached.stat
    )


ROW_TYPES = (
    ("session_id", "text"),
    ("chat_key", "text"),
    ("chat_id", "text"),
    ("character", "text"),
    ("user_name", "text"),
    ("architecture", "text"),
    ("context_mode", "text"),
    ("parent_session_id", "text"),
    ("forked_at_seq", "integer"),
    ("created_at", "timestamptz"),
    ("message_count", "integer"),
    ("last_seq", "integer"),
    ("gen_started", "timestamptz"),
    ("revision", "text"),
    ("edited", "boolean"),
    ("group_id", "text"),
    ("group_binding", "text"),
    ("chat_header", "text"),
)


def row_values(cached: Cached) -> tuple[Any, ...]:
    state, b = cached.state, cached.state.binding
    return (
        b.session_id,
        b.key,
        b.chat_id,
        b.character,
        b.user_name,
        b.architecture,
        b.context_mode,
        b.parent_session_id,
        b.forked_at_seq,
        cached.created_at,
        len(state.messages),
        state.last_seq,
        state.gen_started,
        cached.revision,
        cached.edited_outside,
        b.group_file if b.group else None,
        b.group.model_dump_json() if b.group else None,
        json.dumps(state.header) if b.group else None,
    )


async def save_row(conn: Conn, target: Target, cached: Cached) -> None:
    await save_rows(conn, target, [cached])


async def save_rows(conn: Conn, target: Target, saved: Sequence[Cached]) -> None:
    """The rows of these chats (one each), in one statement."""
    if not saved:
        return
    columns = [list(c) for c in zip(*(row_values(cached) for cached in saved), strict=True)]
    arrays = ", ".join(f"${i}::{kind}[]" for i, (_, kind) in enumerate(ROW_TYPES, 1))
    names = ", ".join(name for name, _ in ROW_TYPES)
    await conn.execute(
        f"""INSERT INTO {target.table("chats")} (session_id, chat_key, chat_id, character,
               user_name, architecture, context_mode, parent_session_id, forked_at_seq,
               created_at, message_count, last_seq, gen_started, revision, status, updated_at,
               edited_outside_at, group_id, group_binding, chat_header)
            SELECT session_id, chat_key, chat_id, character, user_name, architecture,
               context_mode, parent_session_id, forked_at_seq, created_at, message_count,
               last_seq, gen_started, revision, 'ok', now(), CASE WHEN edited THEN now() END,
               group_id, group_binding::jsonb, chat_header::jsonb
            FROM unnest({arrays}) AS r({names})
            ON CONFLICT (session_id) DO UPDATE SET chat_key = EXCLUDED.chat_key,
               character = EXCLUDED.character, user_name = EXCLUDED.user_name,
               architecture = EXCLUDED.architecture, context_mode = EXCLUDED.context_mode,
               message_count = EXCLUDED.message_count, last_seq = EXCLUDED.last_seq,
               gen_started = EXCLUDED.gen_started, revision = EXCLUDED.revision,
               updated_at = now(), group_id = EXCLUDED.group_id,
               group_binding = EXCLUDED.group_binding, chat_header = EXCLUDED.chat_header,
               edited_outside_at = COALESCE(EXCLUDED.edited_outside_at,
                                            {target.table("chats")}.edited_outside_at)""",
        *columns,
    )
    for cached in saved:
        cached.edited_outside = False


async def mark_needs_repair(conn: Conn, table: str, session_id: str, seq: int, error: str) -> None:
    """Flag the chat (creating its row if it has none) so `tavern repair` rebuilds it."""
    await conn.execute(
        f"""INSERT INTO {table} (session_id, chat_key, chat_id, character, user_name,
               architecture, created_at, status, error, failed_seq)
            VALUES ($1, '', $1, '', '', '', now(), 'needs_repair', $2, $3)
            ON CONFLICT (session_id) DO UPDATE SET status = 'needs_repair',
               error = EXCLUDED.error, failed_seq = EXCLUDED.failed_seq, updated_at = now()""",
        session_id,
        error[:2000],
        seq,
    )


async def asset_name(conn: Conn, table: str, asset_id: str | None, owner: str) -> str | None:
    """The name of `owner`'s asset (a session reads only its owner's cards and personas)."""
    if asset_id is None:
        return None
    found = await conn.fetchval(
        f"SELECT name FROM projector.{table} WHERE owner = $2"
        " AND (asset_id = $1 OR lower(name) = lower($1)) ORDER BY asset_id = $1 DESC LIMIT 1",
        asset_id,
        owner,
    )
    return str(found) if found is not None else None


async def character_row(conn: Conn, asset_id: str | None, owner: str) -> Any:
    """The bound card's name and file stem (by id, or by name as a client may give it), if
    it is the session owner's."""
    if asset_id is None:
        return None
    return await conn.fetchrow(
        "SELECT name, file_stem FROM projector.characters WHERE owner = $2"
        " AND (asset_id = $1 OR lower(name) = lower($1)) ORDER BY asset_id = $1 DESC LIMIT 1",
        asset_id,
        owner,
    )


async def redacted_seqs(conn: Conn, session_id: str) -> set[int]:
    rows = await conn.fetch(
        "SELECT seq FROM projector.redactions WHERE session_id = $1", session_id
    )
    return {r["seq"] for r in rows}


async def redact_line(conn: Conn, target: Target, tz: tzinfo, session_id: str, seq: int) -> None:
    """Blank one projected message in its chat file (called while redactions are locked)."""
    projection = ChatProjection(tz)
    try:
        cached = await projection.load(conn, target, session_id)
        if cached is None or not chat.redact(cached.state, seq):
            return
        cached.revision = ChatFiles(target.chats_dir).write(
            cached.state.binding.key, cached.state.render()
        )
        await save_row(conn, target, cached)
    except Exception as exc:
        log.error("chat_redaction_failed", session_id=session_id, error=repr(exc))
        await mark_needs_repair(conn, target.table("chats"), session_id, seq, repr(exc))
