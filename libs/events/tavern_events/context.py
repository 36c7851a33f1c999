"""Context defences recorded in the log: a compaction replaces history without editing it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tavern_events.envelope import Model, Payload, SessionEvent
from tavern_events.parts import CallId, ClaimedInput

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


SkipReason = Literal["nothing_to_compact", "not_smaller", "failed", "busy"]


class ContextCompactionSkippedPayload(Payload):
    trigger: Literal["pressure", "overflow", "command"]
    reason: SkipReason
    """`nothing_to_compact`: no span of history may be replaced; `not_smaller`: the summary
    was not smaller than what it would replace; `failed`: the summariser failed; `busy`: a
    `/compact` arrived while a turn was running (send it again when the turn has ended)."""
    detail: str = Field(default="", max_length=500)
    """What the user is shown."""
    tokens_before: int | None = Field(default=None, ge=0)
    tokens_after: int | None = Field(default=None, ge=0)
    input_id: str | None = Field(default=None, max_length=64)
    """The `/compact` command this answers, if a command asked."""
    claimed: tuple[ClaimedInput, ...] = ()
    """`busy`: the `/compact` that arrived mid-turn, claimed here (answered, never run)."""


class ContextCompactionSkipped(SessionEvent):
    """A compaction was asked for (by pressure, an overflow or `/compact`) and history was left
    as it was; `payload.detail` says why, in words the user is shown."""

    type: Literal["context/compaction-skipped"] = "context/compaction-skipped"
    payload: ContextCompactionSkippedPayload
