"""Chats brought in from SillyTavern: where an imported session log came from, and the lines
of such a chat that the model never sees (hidden and system lines).

An imported session's log is `session/created`, `chat/imported` (the file's header and
identity), then one event per line of the file, in order: a line the model sees is a
`user/message` or `assistant/message` whose payload keeps the line as the file held it
(`imported`); a hidden or system line is a `chat/line`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tavern_events.envelope import Payload, SessionEvent


class ChatImportedPayload(Payload):
    source: str = Field(max_length=1000)
    """The file, relative to what was imported (e.g. `chats/default_Seraphina/x.jsonl`)."""
    content_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    """sha256 of the file's bytes: a re-import of the same file is recognised by it."""
    header: dict[str, Any]
    """The file's first line: `user_name`, `character_name`, `create_date`, `chat_metadata`."""
    lines: int = Field(ge=0)
    """How many message lines follow in this log (one event each)."""
    timezone: str = Field(default="UTC", max_length=64)
    """The zone the file's local send dates were read in."""


class ChatImported(SessionEvent):
    """Second entry of an imported session's log: the chat file it reproduces."""

    type: Literal["chat/imported"] = "chat/imported"
    payload: ChatImportedPayload


class ChatLinePayload(Payload):
    line: dict[str, Any]
    """The line as the file held it (`name`, `is_system`, `send_date`, `mes`, `extra`...)."""
    reason: Literal["hidden", "system"] = "hidden"
    """Why the model does not see it: hidden in SillyTavern, or a system/narrator line."""


class ChatLine(SessionEvent):
    """An imported line that stays in the chat but not in the model's history."""

    type: Literal["chat/line"] = "chat/line"
    payload: ChatLinePayload
