"""A session log written by hand (gapless seqs, fixed clock and ids) for the pure profile tests."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tavern_events.envelope import SessionEvent
from tavern_events.message import (
    AssistantMessage,
    AssistantMessagePayload,
    UserMessage,
    UserMessagePayload,
)
from tavern_events.parts import ToolCallPart
from tavern_events.session import SessionCreated, SessionCreatedPayload
from tavern_events.tool import ToolResult, ToolResultPayload
from tavern_events.turn import TurnStarted, TurnStartedPayload
from tavern_loop.domain.drafts import Drafter

T0 = datetime(2026, 8, 14, 15, 5, tzinfo=UTC)


@dataclass
class Log:
    session_id: str = "s1"
    events: list[SessionEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        counter = itertools.count(1)
        self.draft = Drafter(self.session_id, lambda: T0, lambda: f"e{next(counter)}")

    def add(self, cls: type[SessionEvent], payload: Any, **envelope: Any) -> SessionEvent:
        event = self.draft(cls, payload, seq=len(self.events) + 1, **envelope)
        self.events.append(event)
        return event

    def created(self, **binding: Any) -> SessionEvent:
        binding.setdefault("architecture", "agent-tavern")
        if binding["architecture"] == "agent-tavern":
            binding.setdefault("context_mode", "dsh-native")
        binding.setdefault("chat_id", self.session_id)
        return self.add(SessionCreated, SessionCreatedPayload(**binding))

    def turn(self, number: int) -> None:
        self.draft.turn, self.draft.step = number, 1
        self.add(TurnStarted, TurnStartedPayload())

    def user(self, text: str, source: str = "user", **envelope: Any) -> SessionEvent:
        return self.add(UserMessage, UserMessagePayload(text=text), source=source, **envelope)

    def reply(self, text: str, *calls: str, form: str | None = None) -> SessionEvent:
        parts = tuple(ToolCallPart(id=c, name="t", arguments="{}") for c in calls)
        payload = AssistantMessagePayload(content=text, tool_calls=parts)
        return self.add(AssistantMessage, payload, form=form)

    def result(self, call_id: str, content: str = "ok") -> SessionEvent:
        payload = ToolResultPayload(call_id=call_id, name="t", ok=True, content=content)
        return self.add(ToolResult, payload, source="tool:t")
