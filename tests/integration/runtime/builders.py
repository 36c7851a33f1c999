"""Small session events for the runtime tests."""

from __future__ import annotations

from datetime import UTC, datetime

from tavern_events.ids import new_id
from tavern_events.message import UserMessage, UserMessagePayload
from tavern_events.step import StepStarted


def step(session_id: str, n: int = 1) -> StepStarted:
    return StepStarted(id=new_id(), session_id=session_id, ts=datetime.now(UTC), turn=1, step=n)


def said(session_id: str, text: str) -> UserMessage:
    return UserMessage(
        id=new_id(),
        session_id=session_id,
        ts=datetime.now(UTC),
        turn=1,
        source="user",
        payload=UserMessagePayload(text=text),
    )
