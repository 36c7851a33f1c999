"""Conversation messages: user messages, raw assistant stream chunks, full assistant messages."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tavern_events.envelope import Id, Payload, SessionEvent
from tavern_events.group import Speaker
from tavern_events.parts import Attachment, FinishReason, ToolCallDelta, ToolCallPart, Usage


class UserMessagePayload(Payload):
    text: str
    name: str | None = Field(default=None, max_length=128)
    input_id: Id | None = None
    attachments: tuple[Attachment, ...] = ()
    imported: dict[str, Any] | None = None
    """The SillyTavern chat line this message was imported from, as the file held it."""


class UserMessage(SessionEvent):
    """A user-role message: a claimed input, or injected context (recall, reminder) whose
    envelope `source`/`form` says where it came from."""

    type: Literal["user/message"] = "user/message"
    payload: UserMessagePayload


class AssistantChunkPayload(Payload):
    index: int = Field(ge=0)
    attempt: int = Field(default=1, ge=1)
    delta: str = ""
    reasoning_delta: str = ""
    tool_calls: tuple[ToolCallDelta, ...] = ()
    finish_reason: FinishReason | None = None
    usage: Usage | None = None


class AssistantChunk(SessionEvent):
    """One raw stream delta, kept for replay and UI fidelity (failed attempts included)."""

    type: Literal["assistant/chunk"] = "assistant/chunk"
    payload: AssistantChunkPayload


class AssistantMessagePayload(Payload):
    content: str = ""
    reasoning_content: str | None = None
    tool_calls: tuple[ToolCallPart, ...] = ()
    usage: Usage = Usage()
    finish_reason: FinishReason = "stop"
    partial: bool = False
    provider: str | None = None
    model: str | None = None
    swipes: tuple[str, ...] | None = None
    """A greeting's versions as the card holds them (`first_mes`, then the alternate
    greetings, macros as written); `content` is the one shown, macros expanded."""
    imported: dict[str, Any] | None = None
    """The SillyTavern chat line this reply was imported from, as the file held it (its
    `swipes`, `swipe_id`, `swipe_info`, dates and extra fields); `content` is its chosen swipe."""
    speaker: Speaker | None = None
    """In a group chat, the member who spoke (also the envelope's `actor_id`)."""


class AssistantMessage(SessionEvent):
    """The assembled answer of one successful model request.

    `partial` marks a prefix kept after a cancelled or broken stream (never has tool calls).
    Form `greeting`: the character's first message of a new chat (no model ran).
    In a group chat the envelope's `actor_id` is the speaking member's character id, as on
    its chunks, tool calls and steps, and `payload.speaker` names it.
    """

    type: Literal["assistant/message"] = "assistant/message"
    payload: AssistantMessagePayload
