"""Inputs for a session's loop (INPUTS stream): a message, a cancel, a command."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from tavern_events.envelope import InputCommand, Payload
from tavern_events.parts import Attachment


class MessageInputPayload(Payload):
    text: str = Field(min_length=1)
    name: str | None = Field(default=None, max_length=128)
    attachments: tuple[Attachment, ...] = ()


class MessageInput(InputCommand):
    """A user message for the session; claimed by a turn and appended as `user/message`."""

    type: Literal["input/message"] = "input/message"
    payload: MessageInputPayload


class CancelInputPayload(Payload):
    reason: str | None = Field(default=None, max_length=500)


class CancelInput(InputCommand):
    """Cancel the current turn (only the turn: committed writes stay)."""

    type: Literal["input/cancel"] = "input/cancel"
    payload: CancelInputPayload = CancelInputPayload()


class CommandInputPayload(Payload):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,31}$")
    """The command without its slash, e.g. `compact`."""
    args: dict[str, JsonValue] = Field(default_factory=dict)


class CommandInput(InputCommand):
    """A slash command for the session's loop, e.g. `/compact`."""

    type: Literal["input/command"] = "input/command"
    payload: CommandInputPayload
