"""Session events for the ledger's tests: `user_message(...)`, `tool_result(...)` and the like."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tavern_events.group import GroupBinding
from tavern_events.ids import new_id
from tavern_events.message import (
    AssistantMessage,
    AssistantMessagePayload,
    UserMessage,
    UserMessagePayload,
)
from tavern_events.parts import ErrorInfo
from tavern_events.reach import MemoryReach
from tavern_events.session import SessionCreated, SessionCreatedPayload
from tavern_events.tool import ToolResult, ToolResultPayload

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def at(seq: int) -> datetime:
    return T0 + timedelta(seconds=seq)


def user_message(
    session_id: str = "s1",
    seq: int = 2,
    text: str = "I prefer tea",
    *,
    source: str = "user",
    form: str | None = None,
    ts: datetime | None = None,
    event_id: str | None = None,
) -> UserMessage:
    return UserMessage(
        id=event_id or new_id(),
        session_id=session_id,
        seq=seq,
        ts=ts or at(seq),
        source=source,
        form=form,
        payload=UserMessagePayload(text=text),
    )


def tool_result(
    session_id: str = "s1",
    seq: int = 3,
    content: str = "The capital of France is Paris.",
    *,
    name: str = "web_fetch",
    ok: bool = True,
    synthetic: bool = False,
    ts: datetime | None = None,
) -> ToolResult:
    error = None if ok else ErrorInfo(code="TOOL_FAILED", message=content)
    return ToolResult(
        id=new_id(),
        session_id=session_id,
        seq=seq,
        ts=ts or at(seq),
        source=f"tool:{name}",
        payload=ToolResultPayload(
            call_id=f"call-{seq}",
            name=name,
            ok=ok,
            content=content,
            error=error,
            synthetic=synthetic,
        ),
    )


def session_created(
    session_id: str = "s1",
    *,
    chat_id: str | None = None,
    source: str = "host",
    parent: str | None = None,
    character_id: str | None = None,
    memory_reach: MemoryReach | None = None,
    owner: str = "local",
    group: GroupBinding | None = None,
) -> SessionCreated:
    return SessionCreated(
        id=new_id(),
        session_id=session_id,
        seq=1,
        ts=at(1),
        source=source,
        payload=SessionCreatedPayload(
            architecture="agent-tavern",
            context_mode="dsh-native",
            chat_id=chat_id or session_id,
            parent_session_id=parent,
            forked_at_seq=3 if parent else None,
            character_id=character_id,
            memory_reach=memory_reach,
            owner=owner,
            group=group,
        ),
    )


def assistant_message(
    session_id: str = "s1", seq: int = 4, text: str = "Sure!"
) -> AssistantMessage:
    return AssistantMessage(
        id=new_id(),
        session_id=session_id,
        seq=seq,
        ts=at(seq),
        payload=AssistantMessagePayload(content=text),
    )
