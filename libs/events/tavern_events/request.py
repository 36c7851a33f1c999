"""What the loop asked the model: the request, and (agent-managed mode) its log projection."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue, model_validator

from tavern_events.envelope import Model, Payload, SessionEvent

OFFLINE_PROVIDER = "offline"


class AgentRequestPayload(Payload):
    provider: str = Field(min_length=1, max_length=64)
    model: str = Field(min_length=1, max_length=200)
    offline: bool = False
    """True for the deterministic offline provider: its answers are not a model's."""
    route: str | None = Field(default=None, max_length=64)
    attempt: int = Field(default=1, ge=1)
    message_count: int = Field(ge=0)
    tool_names: tuple[str, ...] = ()
    token_estimate: int = Field(ge=0)
    context_window: int | None = Field(default=None, ge=1)
    params: dict[str, JsonValue] = Field(default_factory=dict)
    """Sampling parameters sent (temperature, max_tokens...), so the request can be rebuilt."""

    @model_validator(mode="after")
    def _labelled(self) -> AgentRequestPayload:
        if self.provider == OFFLINE_PROVIDER and not self.offline:
            raise ValueError("the offline provider must be labelled offline")
        return self


class AgentRequest(SessionEvent):
    """A model request is about to be sent (one per attempt)."""

    type: Literal["agent/request"] = "agent/request"
    payload: AgentRequestPayload


class RetryTarget(Model):
    """The target a route handed a request over to."""

    provider: str = Field(min_length=1, max_length=64)
    model: str = Field(min_length=1, max_length=200)
    offline: bool = False


class AgentRetryPayload(Payload):
    provider: str = Field(min_length=1, max_length=64)
    model: str = Field(min_length=1, max_length=200)
    route: str | None = Field(default=None, max_length=64)
    attempt: int = Field(ge=1)
    """Which attempt at this target failed (1 = the first)."""
    reason: str = Field(min_length=1, max_length=64)
    """The provider error's code (`rate_limited`, `timeout`, `server_error`, `unavailable`...)."""
    message: str = Field(default="", max_length=4000)
    status: int | None = None
    provider_code: str | None = Field(default=None, max_length=64)
    """The server's own error code, when it gave one (`insufficient_quota`...)."""
    delay_s: float | None = Field(default=None, ge=0)
    """A retry of the same target follows after this wait."""
    fallback: RetryTarget | None = None
    """The route's next target takes the request over (a new `agent/request` follows)."""


class AgentRetry(SessionEvent):
    """A model request attempt failed before any output and another follows: the same target
    again after a wait, or the route's next target."""

    type: Literal["agent/retry"] = "agent/retry"
    payload: AgentRetryPayload


ZoneName = Literal["kernel", "recent", "retrieved"]


class BudgetZone(Model):
    """One zone of the projection budget: its limit, what it used, how many entries."""

    name: ZoneName
    budget_tokens: int = Field(ge=0)
    used_tokens: int = Field(ge=0)
    items: int = Field(default=0, ge=0)


class RequestProjectionPayload(Payload):
    included_seqs: tuple[int, ...]
    """Log seqs the request includes, in surface order (not necessarily ascending)."""
    required_seqs: tuple[int, ...] = ()
    surface_generation: int = Field(ge=0)
    """How many surface replacements (compactions) preceded this projection."""
    revision: str | None = Field(default=None, max_length=128)
    """The projector's own opaque revision, if it keeps one."""
    budget_tokens: int = Field(ge=0)
    zones: tuple[BudgetZone, ...] = ()
    token_estimate: int = Field(ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> RequestProjectionPayload:
        if len(set(self.included_seqs)) != len(self.included_seqs):
            raise ValueError("included_seqs must be distinct")
        if min(self.included_seqs, default=1) < 1:
            raise ValueError("seqs start at 1")
        if not set(self.required_seqs) <= set(self.included_seqs):
            raise ValueError("every required seq must be included")
        return self


class RequestProjection(SessionEvent):
    """Agent-managed mode: which log entries the next request includes, under which budget."""

    type: Literal["request/projection"] = "request/projection"
    payload: RequestProjectionPayload
