"""Session lifecycle events: created (with its binding), binding changed, forked."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tavern_events.envelope import Id, Payload, SessionEvent
from tavern_events.group import GroupBinding
from tavern_events.reach import LOCAL_OWNER, MemoryReach

Architecture = Literal["agent-tavern", "st"]
ContextMode = Literal["dsh-native", "agent-managed"]


def check_binding(architecture: Architecture, context_mode: ContextMode | None) -> None:
    """agent-tavern needs a context mode; st has none."""
    if architecture == "agent-tavern" and context_mode is None:
        raise ValueError("an agent-tavern binding needs a context_mode")
    if architecture == "st" and context_mode is not None:
        raise ValueError("an st binding has no context_mode")


class SessionCreatedPayload(Payload):
    architecture: Architecture
    context_mode: ContextMode | None = None
    chat_id: Id
    character_id: Id | None = None
    persona_id: Id | None = None
    parent_session_id: Id | None = None
    forked_at_seq: int | None = Field(default=None, ge=1)
    agent_id: Id = "main"
    title: str | None = Field(default=None, max_length=200)
    memory_reach: MemoryReach | None = None
    """How far the session's memory reaches (`tavern_events.reach`): its chat alone (a private
    chat), every chat with its character, or every chat of its agent; None is the default."""
    owner: Id = LOCAL_OWNER
    """The user the session, its chat and its memory belong to. Logs written before owners
    were recorded read as `local`, the default owner of a single-user install."""
    group: GroupBinding | None = None
    """A group chat: its members, who may speak and how the speaker is chosen (None: one
    character, `character_id`)."""

    @model_validator(mode="after")
    def _consistent(self) -> SessionCreatedPayload:
        check_binding(self.architecture, self.context_mode)
        if (self.parent_session_id is None) != (self.forked_at_seq is None):
            raise ValueError("parent_session_id and forked_at_seq go together")
        return self


class SessionCreated(SessionEvent):
    """The first entry of every session log: its binding and, for a fork, its parent.

    Current version 2: `context_mode` is required for agent-tavern. A v1 event without it is
    upcast on read to `dsh-native` (DESIGN.md §3: a binding without a mode migrates).
    """

    type: Literal["session/created"] = "session/created"
    v: Literal[2] = 2
    payload: SessionCreatedPayload


class SessionBindingChangedPayload(Payload):
    from_architecture: Architecture
    from_context_mode: ContextMode | None = None
    to_architecture: Architecture
    to_context_mode: ContextMode | None = None
    reason: str | None = Field(default=None, max_length=500)
    group: GroupBinding | None = None
    """The group binding from now on (strategy, talkativeness, auto mode...); None keeps it."""

    @model_validator(mode="after")
    def _consistent(self) -> SessionBindingChangedPayload:
        check_binding(self.to_architecture, self.to_context_mode)
        before = (self.from_architecture, self.from_context_mode)
        if self.group is None and before == (self.to_architecture, self.to_context_mode):
            raise ValueError("a binding change must change something")
        return self


class SessionBindingChanged(SessionEvent):
    """The session switched architecture or context mode (only at an idle turn boundary)."""

    type: Literal["session/binding-changed"] = "session/binding-changed"
    payload: SessionBindingChangedPayload


class SessionForkedPayload(Payload):
    child_session_id: Id
    at_seq: int = Field(ge=1)


class SessionForked(SessionEvent):
    """Appended to the parent's log: a child session was forked from it at `at_seq`."""

    type: Literal["session/forked"] = "session/forked"
    payload: SessionForkedPayload
