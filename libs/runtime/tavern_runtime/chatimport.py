"""A SillyTavern chat file becomes a session log, through the normal contract.

The log is `session/created`, then a first turn that no model ran: `turn/start`,
`chat/imported`, one event per line of the file, in order, each dated with the line's own
`send_date`, `turn/stopping` and `turn/end`. A line the model sees is a `user/message` (from
the user, so the ledger takes it in as evidence with its original date) or an
`assistant/message` (its chosen swipe as content); hidden and system lines are `chat/line`.
Every event keeps the line as the file held it. Session and event ids derive from the file's
place and identity, so an import that stops half way resumes, and importing the same file
again changes nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any, Literal

from tavern_events.chat import ChatImported, ChatImportedPayload, ChatLine, ChatLinePayload
from tavern_events.envelope import SessionEvent
from tavern_events.group import GroupBinding, Speaker
from tavern_events.message import (
    AssistantMessage,
    AssistantMessagePayload,
    UserMessage,
    UserMessagePayload,
)
from tavern_events.reach import LOCAL_OWNER
from tavern_events.session import SessionCreated, SessionCreatedPayload
from tavern_events.turn import (
    TurnEnded,
    TurnEndedPayload,
    TurnStarted,
    TurnStartedPayload,
    TurnStopping,
    TurnStoppingPayload,
)
from tavern_events.union import encode
from tavern_runtime import stchat, stgroups
from tavern_runtime.sessionlog import SessionLogReader, SessionLogWriter
from tavern_runtime.stchat import StChat

CHUNK = 500
"""Events per append (one atomic batch each)."""
MAX_EVENT_BYTES = 900_000
"""Stay under NATS's default 1 MiB message limit."""
IMPORTED_TYPE = "chat/imported"
IMPORT_TURN = 1
"""The lines of an imported chat are the log's first turn (no step: no model ran)."""
HEAD = 3
"""Events before the first line: `session/created`, `turn/start`, `chat/imported`."""
TAIL = 2
"""Events after the last line: `turn/stopping`, `turn/end`."""
IMPORTED_REASON = "imported from SillyTavern"
CHANGED = "changed since it was imported"
GREETING = "greeting"
"""The form of a chat's first line when the character speaks it, as a new chat's greeting."""

Status = Literal["imported", "skipped", "refused"]


@dataclass(frozen=True)
class ChatTarget:
    """How an imported session is bound."""

    architecture: Literal["agent-tavern", "st"] = "agent-tavern"
    context_mode: Literal["dsh-native", "agent-managed"] | None = "dsh-native"
    character_id: str | None = None
    persona_id: str | None = None
    group: GroupBinding | None = None
    """A group chat's binding (its definition in `groups/`); `cast` names its speakers."""
    cast: tuple[Speaker, ...] = ()
    owner: str = LOCAL_OWNER
    """The user the imported sessions (and their cards) belong to."""


@dataclass(frozen=True)
class Outcome:
    status: Status
    reason: str
    session_id: str
    messages: int = 0


def session_id_for(source: str, chat: StChat, owner: str = LOCAL_OWNER) -> str:
    """The session a chat file becomes: from its place (`<card stem>/<file name>`), header and
    owner (the `local` owner's ids are those made before owners existed)."""
    created = str(chat.header.get("create_date", ""))
    key = f"{source}\n{created}" if owner == LOCAL_OWNER else f"{owner}:{source}\n{created}"
    digest = hashlib.sha256(key.encode()).hexdigest()
    return f"st-{digest[:24]}"


def _event_id(session_id: str, index: int) -> str:
    return f"st-{hashlib.sha256(f'{session_id}/{index}'.encode()).hexdigest()[:40]}"


# --- pure -----------------------------------------------------------------------------------------


def plan(
    chat: StChat,
    *,
    source: str,
    session_id: str,
    target: ChatTarget,
    tz: tzinfo,
    fallback: datetime,
    title: str | None = None,
) -> list[SessionEvent]:
    """Every event of the imported session's log, in order, numbered from 1."""
    times = _times(chat, tz, fallback)
    created = stchat.send_time(chat.header.get("create_date"), tz) or times[0]
    imported = ChatImported(
        id=_event_id(session_id, 2),
        session_id=session_id,
        seq=3,
        ts=created,
        turn=IMPORT_TURN,
        payload=ChatImportedPayload(
            source=source[:1000],
            content_hash=chat.content_hash,
            header=chat.header,
            lines=len(chat.lines),
            timezone=str(tz)[:64],
        ),
    )
    events: list[SessionEvent] = [
        _created(session_id, created, target, title),
        TurnStarted(
            id=_event_id(session_id, 1),
            session_id=session_id,
            seq=2,
            ts=created,
            turn=IMPORT_TURN,
            payload=TurnStartedPayload(trigger="system"),
        ),
        imported,
    ]
    for index, (line, ts) in enumerate(zip(chat.lines, times[1:], strict=True), start=HEAD):
        speaker = stgroups.speaker_of(line, target.cast) if target.cast else None
        events.append(_line_event(session_id, index, line, ts, speaker=speaker))
    end = times[-1]
    events += [
        TurnStopping(
            id=_event_id(session_id, len(events)),
            session_id=session_id,
            seq=len(events) + 1,
            ts=end,
            turn=IMPORT_TURN,
            payload=TurnStoppingPayload(reason="done", detail=IMPORTED_REASON),
        ),
        TurnEnded(
            id=_event_id(session_id, len(events) + 1),
            session_id=session_id,
            seq=len(events) + 2,
            ts=end,
            turn=IMPORT_TURN,
            payload=TurnEndedPayload(outcome="completed", reason=IMPORTED_REASON),
        ),
    ]
    return events


def _times(chat: StChat, tz: tzinfo, fallback: datetime) -> list[datetime]:
    """The header's time, then each line's; an unreadable date takes the one before it."""
    current = stchat.send_time(chat.header.get("create_date"), tz)
    first = next(
        (t for line in chat.lines if (t := stchat.send_time(line.get("send_date"), tz))), None
    )
    current = current or first or fallback
    found = [current]
    for line in chat.lines:
        current = stchat.send_time(line.get("send_date"), tz) or current
        found.append(current)
    return found


def _created(
    session_id: str, ts: datetime, target: ChatTarget, title: str | None
) -> SessionCreated:
    payload = SessionCreatedPayload(
        architecture=target.architecture,
        context_mode=target.context_mode if target.architecture == "agent-tavern" else None,
        chat_id=session_id,
        character_id=target.character_id,
        persona_id=target.persona_id,
        title=title[:200] if title else None,
        group=target.group,
        owner=target.owner,
        memory_reach="chat" if target.group is not None else None,  # a group chat's own
    )
    return SessionCreated(
        id=_event_id(session_id, 0), session_id=session_id, ts=ts, payload=payload
    )


def _line_event(
    session_id: str,
    index: int,
    line: dict[str, Any],
    ts: datetime,
    *,
    id_key: str | None = None,
    turn: int = IMPORT_TURN,
    speaker: Speaker | None = None,
) -> SessionEvent:
    """The event of the file's line at log position `index` (0-based)."""
    kind = stchat.kind_of(line)
    common: dict[str, Any] = {
        "id": _event_id(id_key or session_id, index),
        "session_id": session_id,
        "seq": index + 1,
        "ts": ts,
        "turn": turn,
    }
    if kind in (stchat.HIDDEN, stchat.SYSTEM):
        reason: Literal["hidden", "system"] = "hidden" if kind == stchat.HIDDEN else "system"
        return ChatLine(
            **common, source="system", payload=ChatLinePayload(line=line, reason=reason)
        )
    text = stchat.text_of(line)
    name = line.get("name") if isinstance(line.get("name"), str) else None
    if kind == stchat.USER:
        user = UserMessagePayload(text=text, name=name[:128] if name else None, imported=line)
        return UserMessage(**common, source="user", payload=user)
    extra = line.get("extra") if isinstance(line.get("extra"), dict) else {}
    assert isinstance(extra, dict)
    reply = AssistantMessagePayload(
        content=text,
        reasoning_content=_text(extra.get("reasoning")),
        provider=_text(extra.get("api")),
        model=_text(extra.get("model")),
        imported=line,
        speaker=speaker,
    )
    opens = index == HEAD and turn == IMPORT_TURN  # the chat's first line: its greeting
    actor = speaker.character_id if speaker is not None else None
    form = GREETING if opens else None
    return AssistantMessage(**common, form=form, actor_id=actor, payload=reply)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def encoded(events: list[SessionEvent]) -> tuple[list[bytes], str | None]:
    """Each event's bytes, and why the log cannot be written (a line too large for one
    message, named by its line in the file), or None."""
    found = [encode(event) for event in events]
    for index, body in enumerate(found):
        if len(body) > MAX_EVENT_BYTES:
            line = index - HEAD + 2  # the header is the file's line 1
            return found, f"line {line} is {len(body)} bytes once encoded: over {MAX_EVENT_BYTES}"
    return found, None


def oversized(events: list[SessionEvent]) -> str | None:
    """Why the log cannot be written, or None (see `encoded`)."""
    return encoded(events)[1]


# --- writing --------------------------------------------------------------------------------------


async def write(
    writer: SessionLogWriter,
    reader: SessionLogReader,
    events: list[SessionEvent],
    progress: Callable[[int], None] | None = None,
) -> Outcome:
    """Append the planned log; an existing import of the same file is left as it is."""
    session_id = events[0].session_id
    lines = len(events) - HEAD - TAIL
    payloads, too_big = encoded(events)
    if too_big is not None:
        return Outcome("refused", too_big, session_id)
    start, why = await _resume_point(writer, reader, events)
    if why is not None and why.startswith(CHANGED):
        grown = await _grown(reader, events)
        if grown is not None:
            return await write_more(writer, grown, progress)
    if why is not None:
        return Outcome("skipped" if start < 0 else "refused", why, session_id)
    if progress is not None and start > HEAD:
        progress(_lines_before(start, lines))
    for first in range(start, len(events), CHUNK):
        chunk = events[first : first + CHUNK]
        bodies = payloads[first : first + CHUNK]
        await writer.append(session_id, chunk, expected_last=first, payloads=bodies)
        if progress is not None:
            progress(_lines_before(first + len(chunk), lines) - _lines_before(first, lines))
    done = _lines_before(start, lines)
    resumed = f" (resumed after {done} lines)" if done else ""
    return Outcome("imported", f"{lines} lines as session {session_id}{resumed}", session_id, lines)


def _lines_before(position: int, lines: int) -> int:
    """How many of the file's lines come before log position `position` (0-based)."""
    return min(max(position - HEAD, 0), lines)


async def _resume_point(
    writer: SessionLogWriter, reader: SessionLogReader, events: list[SessionEvent]
) -> tuple[int, str | None]:
    """Where to start appending: 0 for a new log, the head of a half-written import, or
    (-1, why) when it is done, (0, why) when it must not be touched."""
    session_id = events[0].session_id
    head = await writer.head(session_id)
    if head.log_seq == 0:
        return 0, None
    found = await reader.last(session_id, IMPORTED_TYPE)
    if not isinstance(found, ChatImported):
        return 0, f"session {session_id} exists and is not an import of this file"
    planned = events[HEAD - 1]
    assert isinstance(planned, ChatImported)
    if found.payload.content_hash != planned.payload.content_hash:
        return 0, (
            f"{CHANGED} as session {session_id} "
            f"({await _imported_lines(reader, session_id)} lines then, "
            f"{planned.payload.lines} now): only a chat that grew at its end, and was not "
            "continued here, is brought up to date; nothing was changed"
        )
    if head.log_seq >= len(events) or head.event_id != events[head.log_seq - 1].id:
        return -1, f"already imported as session {session_id}"
    return head.log_seq, None


# --- a chat that grew in SillyTavern --------------------------------------------------------------


def line_of(event: SessionEvent) -> dict[str, Any] | None:
    """The file line an imported event holds (None: not an imported line)."""
    if isinstance(event, ChatLine):
        return event.payload.line
    if isinstance(event, UserMessage | AssistantMessage):
        return event.payload.imported
    return None


async def _imported_lines(reader: SessionLogReader, session_id: str) -> int:
    return sum(1 for e in await reader.events(session_id) if line_of(e) is not None)


@dataclass(frozen=True)
class Grown:
    events: list[SessionEvent]
    before: int
    """Lines imported earlier."""


async def _grown(reader: SessionLogReader, planned: list[SessionEvent]) -> Grown | None:
    """The turn that brings an imported chat up to date, when the file only grew at its end
    and nothing happened in the session since its last import (else None)."""
    session_id = planned[0].session_id
    log = await reader.events(session_id)
    last = log[-1] if log else None
    if not isinstance(last, TurnEnded) or last.payload.reason != IMPORTED_REASON:
        return None  # continued here: its lines are no longer the file's to extend
    earlier = [line for e in log if (line := line_of(e)) is not None]
    now = [line for e in planned if (line := line_of(e)) is not None]
    if len(now) <= len(earlier) or now[: len(earlier)] != earlier:
        return None
    imported = planned[HEAD - 1]
    assert isinstance(imported, ChatImported)
    fresh = [e for e in planned if line_of(e) is not None][len(earlier) :]
    turn, seq = last.turn + 1, last.seq
    key = f"{session_id}/{imported.payload.content_hash[:16]}"
    events: list[SessionEvent] = [
        TurnStarted(
            id=_event_id(key, seq),
            session_id=session_id,
            seq=seq + 1,
            ts=fresh[0].ts,
            turn=turn,
            payload=TurnStartedPayload(trigger="system"),
        ),
        imported.model_copy(
            update={
                "id": _event_id(key, seq + 1),
                "seq": seq + 2,
                "turn": turn,
                "ts": fresh[0].ts,
                "payload": imported.payload.model_copy(update={"lines": len(fresh)}),
            }
        ),
    ]
    for event in fresh:
        line = line_of(event)
        assert line is not None
        index = seq + len(events)
        speaker = event.payload.speaker if isinstance(event, AssistantMessage) else None
        events.append(
            _line_event(session_id, index, line, event.ts, id_key=key, turn=turn, speaker=speaker)
        )
    end = fresh[-1].ts
    events += [
        TurnStopping(
            id=_event_id(key, seq + len(events)),
            session_id=session_id,
            seq=seq + len(events) + 1,
            ts=end,
            turn=turn,
            payload=TurnStoppingPayload(reason="done", detail=IMPORTED_REASON),
        ),
        TurnEnded(
            id=_event_id(key, seq + len(events) + 1),
            session_id=session_id,
            seq=seq + len(events) + 2,
            ts=end,
            turn=turn,
            payload=TurnEndedPayload(outcome="completed", reason=IMPORTED_REASON),
        ),
    ]
    return Grown(events, len(earlier))


async def write_more(
    writer: SessionLogWriter, grown: Grown, progress: Callable[[int], None] | None
) -> Outcome:
    """Append the lines a chat gained in SillyTavern since its import, as one more turn."""
    events = grown.events
    session_id = events[0].session_id
    payloads, too_big = encoded(events)
    if too_big is not None:
        return Outcome("refused", too_big, session_id)
    after = events[0].seq - 1
    for first in range(0, len(events), CHUNK):
        chunk = events[first : first + CHUNK]
        bodies = payloads[first : first + CHUNK]
        await writer.append(session_id, chunk, expected_last=after + first, payloads=bodies)
    added = len(events) - 4
    if progress is not None:
        progress(grown.before + added)
    return Outcome(
        "imported",
        f"{added} new lines after the {grown.before} imported before, in session {session_id}",
        session_id,
        added,
    )
