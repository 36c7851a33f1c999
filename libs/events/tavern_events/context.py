"""Context defences recorded in the log: a compaction replaces history without editing it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tavern_events.envelope import Model, Payload, SessionEvent
from tavern_events.parts import CallId

PRUNE_MARKER = "\n\n[... tool result middle pruned ...]\n\n"


class PruningRule(Model):
    """The rule the model-free pruner applied, so `derive_messages` can replay it exactly."""

    threshold_chars: int = Field(ge=1)
    head_chars: int = Field(ge=0)
    tail_chars: int = Field(ge=0)
    marker: str = PRUNE_MARKER


class ContextCompactedPayload(Payload):
    strategy: Literal["summary", "prune"]
    trigger: Literal["pressure", "overflow", "command"]
    summary: str | None = None
    replaces_through_seq: int | None = Field(default=None, ge=1)
    """Summary: every history entry up to and including this seq is replaced by `summary`."""
    pruned_call_ids: tuple[CallId, ...] = ()
    pruning: PruningRule | None = None
    tokens_before: int = Field(ge=0)
    tokens_after: int = Field(ge=0)
    provider: str | None = None
    model: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ContextCompactedPayload:
        if self.strategy == "summary" and (not self.summary or not self.replaces_through_seq):
            raise ValueError("a summary compaction needs summary and replaces_through_seq")
        if self.strategy == "prune" and (not self.pruned_call_ids or self.pruning is None):
            raise ValueError("a prune compaction needs pruned_call_ids and pruning")
        if self.tokens_after > self.tokens_before:
            raise ValueError("a compaction must not grow the context")
        return self


class ContextCompacted(SessionEvent):
    """History was compacted: a summary replaces a prefix, or tool results were pruned."""

    type: Literal["context/compacted"] = "context/compacted"
    payload: ContextCompactedPayload
