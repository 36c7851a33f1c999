"""The session read model: binding, turn counts and outcomes, token usage, last activity."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from tavern_events.envelope import SessionEvent
from tavern_events.message import AssistantMessage, UserMessage
from tavern_events.session import SessionBindingChanged, SessionCreated, SessionForked
from tavern_events.turn import TurnEnded, TurnStarted

OUTCOMES = ("completed", "cancelled", "failed", "rejected")


@dataclass
class SessionSummary:
    """One row of `projector.sessions`; `apply` updates it in place and returns it."""

    session_id: str
    architecture: str | None = None
    context_mode: str | None = None
    chat_id: str | None = None
    character_id: str | None = None
    persona_id: str | None = None
    parent_session_id: str | None = None
    forked_at_seq: int | None = None
    title: str | None = None
    created_at: datetime | None = None
    last_activity: datetime | None = None
    last_seq: int = 0
    turns: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    open_turn: int | None = None
    user_messages: int = 0
    assistant_messages: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    forks: int = 0
    owner: str = "local"


def apply(state: SessionSummary, event: SessionEvent) -> SessionSummary:
    """Fold one event; events at or below `last_seq` were already counted."""
    if event.seq <= state.last_seq:
        return state
    _fold(state, event)
    state.last_seq = event.seq
    if state.last_activity is None or event.ts > state.last_activity:
        state.last_activity = event.ts
    return state


def _fold(state: SessionSummary, event: SessionEvent) -> None:
    if isinstance(event, SessionCreated):
        _created(state, event)
    elif isinstance(event, SessionBindingChanged):
        state.architecture = event.payload.to_architecture
        state.context_mode = event.payload.to_context_mode
    elif isinstance(event, SessionForked):
        state.forks += 1
    elif isinstance(event, TurnStarted):
        state.open_turn = event.turn
    elif isinstance(event, TurnEnded):
        _ended(state, event)
    elif isinstance(event, UserMessage) and event.source == "user":
        state.user_messages += 1
    elif isinstance(event, AssistantMessage) and not event.payload.tool_calls:
        state.assistant_messages += 1


def _created(state: SessionSummary, event: SessionCreated) -> None:
    p = event.payload
    state.architecture, state.context_mode = p.architecture, p.context_mode
    state.chat_id, state.character_id, state.persona_id = p.chat_id, p.character_id, p.persona_id
    state.parent_session_id, state.forked_at_seq = p.parent_session_id, p.forked_at_seq
    state.title, state.created_at = p.title, event.ts
    state.owner = p.owner


def _ended(state: SessionSummary, event: TurnEnded) -> None:
    p = event.payload
    state.turns += 1
    state.outcomes[p.outcome] = state.outcomes.get(p.outcome, 0) + 1
    state.open_turn = None
    state.prompt_tokens += p.usage.prompt_tokens
    state.completion_tokens += p.usage.completion_tokens
    state.total_tokens += p.usage.total_tokens
