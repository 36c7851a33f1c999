"""Turn boundaries: start (claims the pending inputs), stopping, end (outcome and totals)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tavern_events.envelope import Id, Payload, SessionEvent
from tavern_events.parts import ClaimedInput, ErrorInfo, Usage

TurnTrigger = Literal["input", "command", "resume", "system"]
StopReason = Literal["done", "cancelled", "max_steps", "failed", "rejected"]
TurnOutcome = Literal["completed", "cancelled", "failed", "rejected"]


class TurnStartedPayload(Payload):
    claimed: tuple[ClaimedInput, ...] = ()
    trigger: TurnTrigger = "input"
    speakers: tuple[Id, ...] | None = None
    """A group chat: the members chosen to answer the claim, in order (None: one character).
    Auto-mode replies that follow in the same turn are chosen as they come (seeded by the
    session, the turn and the reply's place); each reply's `actor_id` says who spoke."""


class TurnStarted(SessionEvent):
    """Opens turn `turn` and claims inputs; the last claimed stream_seq is the input cursor."""

    type: Literal["turn/start"] = "turn/start"
    payload: TurnStartedPayload


class TurnStoppingPayload(Payload):
    reason: StopReason
    detail: str | None = Field(default=None, max_length=500)


class TurnStopping(SessionEvent):
    """No further step will run in this turn."""

    type: Literal["turn/stopping"] = "turn/stopping"
    payload: TurnStoppingPayload


class TurnEndedPayload(Payload):
    outcome: TurnOutcome
    reason: str | None = Field(default=None, max_length=500)
    steps: int = Field(default=0, ge=0)
    usage: Usage = Usage()
    error: ErrorInfo | None = None
    max_tokens: bool | None = None
    """True when a step's reply was cut at the token limit (`finish_reason: length`): its tool
    calls were not run (their arguments may be cut too) and the reply may end mid-sentence."""

    @model_validator(mode="after")
    def _consistent(self) -> TurnEndedPayload:
        if self.outcome == "completed" and self.error is not None:
            raise ValueError("a completed turn carries no error")
        if self.outcome == "rejected" and self.steps:
            raise ValueError("a rejected turn spent no step")
        return self


class TurnEnded(SessionEvent):
    """Closes the turn: outcome, how many steps ran, the usage totals."""

    type: Literal["turn/end"] = "turn/end"
    payload: TurnEndedPayload
