"""Step boundaries: one model request plus the tool executions its answer caused."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tavern_events.envelope import Payload, SessionEvent
from tavern_events.parts import ClaimedInput, FinishReason, Usage


class StepStartedPayload(Payload):
    claimed: tuple[ClaimedInput, ...] = ()
    """Inputs claimed mid-turn at this step boundary (the turn's first claim is on turn/start)."""


class StepStarted(SessionEvent):
    """Opens step `step` of turn `turn`."""

    type: Literal["step/start"] = "step/start"
    payload: StepStartedPayload = StepStartedPayload()


class StepEndedPayload(Payload):
    usage: Usage = Usage()
    tool_calls: int = Field(default=0, ge=0)
    finish_reason: FinishReason | None = None


class StepEnded(SessionEvent):
    """Closes the step (always written once a step started, even on failure)."""

    type: Literal["step/end"] = "step/end"
    payload: StepEndedPayload = StepEndedPayload()
