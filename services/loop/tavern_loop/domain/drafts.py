"""Builds session-log events for one session; ids and time come from injected callables."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from tavern_events.envelope import SessionEvent

E = TypeVar("E", bound=SessionEvent)


@dataclass
class Drafter:
    """Stamps envelopes: session, agent, actor, turn, step, correlation; `seq` is left to the
    writer."""

    session_id: str
    clock: Callable[[], datetime]
    new_id: Callable[[], str]
    agent_id: str = "main"
    actor_id: str | None = None
    """In a group chat, the member speaking now (its chunks, calls, replies and steps)."""
    turn: int = 0
    step: int = 0
    correlation_id: str | None = None

    def __call__(self, cls: type[E], payload: Any, **envelope: Any) -> E:
        fields: dict[str, Any] = {
            "id": self.new_id(),
            "session_id": self.session_id,
            "ts": self.clock(),
            "turn": self.turn,
            "step": self.step,
            "agent_id": self.agent_id,
            "actor_id": self.actor_id,
            "correlation_id": self.correlation_id,
            "payload": payload,
        }
        fields.update(envelope)
        event: E = cls.model_validate(fields)
        return event
