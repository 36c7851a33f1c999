"""What the loop must know about a session, folded from its log: binding, cursor, open turn."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from tavern_events.context import ContextCompactionSkipped
from tavern_events.envelope import SessionEvent
from tavern_events.group import (
    GroupBinding,
    MemberAdded,
    MemberMuted,
    MemberRemoved,
    MemberUnmuted,
    apply_member_event,
)
from tavern_events.message import AssistantMessage
from tavern_events.parts import ClaimedInput
from tavern_events.reach import MemoryReach
from tavern_events.session import SessionBindingChanged, SessionCreated
from tavern_events.step import StepEnded, StepStarted
from tavern_events.tool import ToolCall, ToolResult
from tavern_events.turn import TurnEnded, TurnStarted


@dataclass(frozen=True)
class Binding:
    architecture: str = "agent-tavern"
    context_mode: str | None = "dsh-native"
    chat_id: str | None = None
    character_id: str | None = None
    persona_id: str | None = None
    agent_id: str = "main"
    memory_reach: MemoryReach | None = None
    owner: str = "local"
    """The user the session belongs to (`session/created`); only they may send it input."""
    group: GroupBinding | None = None
    """A group chat's members and speaker rules, as its membership events left them."""


@dataclass
class OpenTurn:
    """A turn that has a turn/start but no turn/end yet."""

    turn: int
    step: int = 0
    step_open: bool = False
    start_seq: int = 0
    asked: dict[str, str] = field(default_factory=dict)  # call id -> tool name, from the model
    started: set[str] = field(default_factory=set)  # call ids with a tool/call event
    answered: set[str] = field(default_factory=set)  # call ids with a tool/result event

    def unanswered(self) -> list[tuple[str, str, bool]]:
        """(call id, tool name, started) of calls that never got a result, in model order."""
        return [
            (cid, name, cid in self.started)
            for cid, name in self.asked.items()
            if cid not in self.answered
        ]


@dataclass
class SessionState:
    session_id: str
    created: bool = False
    binding: Binding = field(default_factory=Binding)
    last_seq: int = 0
    last_turn: int = 0
    input_cursor: int = 0  # the INPUTS stream seq of the last claimed input
    claimed_ids: set[str] = field(default_factory=set)
    open_turn: OpenTurn | None = None

    def apply(self, event: SessionEvent) -> None:
        self.last_seq = max(self.last_seq, event.seq)
        if isinstance(event, SessionCreated):
            self._created(event)
        elif isinstance(event, SessionBindingChanged):
            p = event.payload
            self.binding = _replace(self.binding, p.to_architecture, p.to_context_mode)
            if p.group is not None:
                self.binding = replace(self.binding, group=p.group)
        elif isinstance(event, MemberAdded | MemberRemoved | MemberMuted | MemberUnmuted):
            if self.binding.group is not None:
                group = apply_member_event(self.binding.group, event)
                self.binding = replace(self.binding, group=group)
        elif isinstance(event, TurnStarted):
            self.last_turn = event.turn
            self.open_turn = OpenTurn(event.turn, start_seq=event.seq)
            self._claim(event.payload.claimed)
        elif isinstance(event, TurnEnded):
            self.open_turn = None
        else:
            self._in_turn(event)

    def _created(self, event: SessionCreated) -> None:
        p = event.payload
        self.created = True
        self.binding = Binding(
            p.architecture,
            p.context_mode,
            p.chat_id,
            p.character_id,
            p.persona_id,
            p.agent_id,
            p.memory_reach,
            p.owner,
            p.group,
        )

    def _claim(self, claimed: Iterable[ClaimedInput]) -> None:
        for item in claimed:
            self.input_cursor = max(self.input_cursor, item.stream_seq)
            self.claimed_ids.add(item.input_id)

    def _in_turn(self, event: SessionEvent) -> None:
        turn = self.open_turn
        if turn is None:
            return
        if isinstance(event, StepStarted):
            turn.step, turn.step_open = event.step, True
            self._claim(event.payload.claimed)
        elif isinstance(event, ContextCompactionSkipped):
            self._claim(event.payload.claimed)  # a /compact answered "busy" mid-turn
        elif isinstance(event, StepEnded):
            turn.step_open = False
        elif isinstance(event, AssistantMessage):
            turn.asked.update({c.id: c.name for c in event.payload.tool_calls})
        elif isinstance(event, ToolCall):
            turn.started.add(event.payload.call_id)
        elif isinstance(event, ToolResult):
            turn.answered.add(event.payload.call_id)


def _replace(binding: Binding, architecture: str, context_mode: str | None) -> Binding:
    return replace(binding, architecture=architecture, context_mode=context_mode)


def fold(session_id: str, log: Iterable[SessionEvent]) -> SessionState:
    state = SessionState(session_id)
    for event in log:
        state.apply(event)
    return state
