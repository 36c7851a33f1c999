"""Tool execution: the call as started, and its result (also for rejected or synthetic calls)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tavern_events.envelope import Model, Payload, SessionEvent
from tavern_events.parts import CallId, ErrorInfo, ToolName


class ToolCallPayload(Payload):
    call_id: CallId
    name: ToolName
    arguments: str = ""
    """The raw JSON text the model wrote (may be invalid; the pipeline then rejects it)."""
    parallel_safe: bool = False


class ToolCall(SessionEvent):
    """A tool call starts (before pre-execute)."""

    type: Literal["tool/call"] = "tool/call"
    payload: ToolCallPayload


class SpillRef(Model):
    """Where the full output of a spilled result is stored (opened by the `spill_read` tool)."""

    locator: str = Field(min_length=1, max_length=1024)
    bytes: int = Field(ge=0)
    retrieval_hint: str | None = Field(default=None, max_length=500)


class ToolResultPayload(Payload):
    call_id: CallId
    name: ToolName
    ok: bool
    content: str
    """What the model sees: the output, a bounded preview of a spilled one, or the error text."""
    error: ErrorInfo | None = None
    truncated: bool = False
    spill: SpillRef | None = None
    synthetic: bool = False
    """Written by the host without running the tool (cancelled before dispatch, crash repair)."""
    duration_ms: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> ToolResultPayload:
        if self.ok == (self.error is not None):
            raise ValueError("a result has an error exactly when it is not ok")
        return self


class ToolResult(SessionEvent):
    """The outcome of one tool call, in model order."""

    type: Literal["tool/result"] = "tool/result"
    payload: ToolResultPayload
