"""Payload parts shared by several event families: usage, errors, tool calls, claims."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from tavern_events.envelope import Id, Model

CallId = Annotated[str, Field(min_length=1, max_length=256)]
"""A provider-issued tool-call id, echoed back verbatim; never part of a subject, so lenient."""

ToolName = Annotated[str, Field(min_length=1, max_length=256)]
"""A tool name as the model wrote it (it may name no real tool: the result then says so)."""

Token = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")]
"""A lower-case vocabulary word (`user_explicit`, `session-event`...)."""

Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]

InputKind = Literal["message", "cancel", "command"]

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "cancelled", "error"]
"""Why a model stream ended; provider adapters map their own words onto these."""

_FINISH_ALIASES: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "end_turn": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
    "cancelled": "cancelled",
    "abort": "cancelled",
    "error": "error",
}


def finish_reason_of(raw: str | None) -> FinishReason:
    """Map a provider's finish reason onto the contract's; a missing or unknown one is `stop`."""
    return _FINISH_ALIASES.get((raw or "stop").lower(), "stop")


class Usage(Model):
    """Token counts as the provider reported them (OpenAI names)."""

    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    total_tokens: int = Field(default=0, ge=0)
    cached_tokens: int | None = Field(default=None, ge=0)
    reasoning_tokens: int | None = Field(default=None, ge=0)

    def plus(self, other: Usage) -> Usage:
        """The sum of two usages (for step and turn totals)."""
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cached_tokens=_add(self.cached_tokens, other.cached_tokens),
            reasoning_tokens=_add(self.reasoning_tokens, other.reasoning_tokens),
        )


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


class ErrorInfo(Model):
    """A structured error: a stable code (`TOOL_TIMEOUT`, `provider_error`) and a message."""

    code: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
    message: str = Field(max_length=4000)
    status: int | None = None
    """A provider failure: the HTTP status the server answered, if any."""
    provider_code: str | None = Field(default=None, max_length=64)
    """A provider failure: the server's own error code (`insufficient_quota`...), if any."""


class ClaimedInput(Model):
    """An input a turn (or a step) claimed: its id and its INPUTS stream sequence."""

    input_id: Id
    stream_seq: int = Field(ge=1)
    kind: InputKind = "message"


class ToolCallPart(Model):
    """A tool call the model asked for; `arguments` is the raw JSON text the model wrote."""

    id: CallId
    name: ToolName
    arguments: str = ""


class ToolCallDelta(Model):
    """A streamed fragment of a tool call; `index` groups the fragments of one call."""

    index: int = Field(ge=0)
    id: CallId | None = None
    name: str | None = None
    arguments: str = ""


class Attachment(Model):
    """A stored blob a message refers to (never inlined: payloads stay small)."""

    kind: Literal["image", "file", "audio"]
    media_type: str = Field(pattern=r"^[a-z]+/[A-Za-z0-9.+_-]+$")
    locator: str = Field(min_length=1, max_length=1024)
    name: str | None = Field(default=None, max_length=256)
    size_bytes: int | None = Field(default=None, ge=0)
