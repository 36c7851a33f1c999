"""Session events for the projector's unit tests (numbered, timestamped)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tavern_events.message import (
    AssistantMessage,
    AssistantMessagePayload,
    UserMessage,
    UserMessagePayload,
)
from tavern_events.parts import ToolCallPart
from tavern_events.request import AgentRequest, AgentRequestPayload
from tavern_events.session import SessionCreated, SessionCreatedPayload

T0 = datetime(2026, 3, 2, 9, 14, 5, tzinfo=UTC)


def at(seq: int) -> datetime:
    return T0 + timedelta(seconds=seq)


def created(sid: str = "s1", seq: int = 1, **payload: Any) -> SessionCreated:
    body = {"architecture": "agent-tavern", "context_mode": "dsh-native", "chat_id": sid, **payload}
    return SessionCreated(
        id=f"e{seq}", session_id=sid, seq=seq, ts=at(seq), payload=SessionCreatedPayload(**body)
    )


def said(text: str, seq: int, sid: str = "s1", source: str = "user", **kw: Any) -> UserMessage:
    return UserMessage(
        id=f"e{seq}",
        session_id=sid,
        seq=seq,
        ts=at(seq),
        turn=1,
        step=1,
        source=source,
        payload=UserMessagePayload(text=text, **kw),
    )


def replied(text: str, seq: int, sid: str = "s1", **kw: Any) -> AssistantMessage:
    body = {"content": text, "provider": "offline", "model": "m1", **kw}
    return AssistantMessage(
        id=f"e{seq}",
        session_id=sid,
        seq=seq,
        ts=at(seq),
        turn=1,
        step=1,
        payload=AssistantMessagePayload(**body),
    )


def requested(seq: int, sid: str = "s1") -> AgentRequest:
    payload = AgentRequestPayload(provider="p", model="m", message_count=1, token_estimate=1)
    return AgentRequest(
        id=f"e{seq}", session_id=sid, seq=seq, ts=at(seq), turn=1, step=1, payload=payload
    )


def tool_call() -> ToolCallPart:
    return ToolCallPart(id="c1", name="echo", arguments="{}")
