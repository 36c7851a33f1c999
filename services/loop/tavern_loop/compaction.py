"""Compaction: prune long tool results first (model-free), then summarise a head of history.

Nothing is edited: each replacement is a `context/compacted` event that `derive_messages`
replays. Cuts fall only where no tool call waits for its result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tavern_events.context import (
    ContextCompacted,
    ContextCompactedPayload,
    ContextCompactionSkippedPayload,
    PruningRule,
    SkipReason,
)
from tavern_events.envelope import SessionEvent
from tavern_events.tool import ToolResult
from tavern_llm.base import ChatRequest, FinalMessage
from tavern_llm.router import ProviderRouter
from tavern_llm.tokens import message_tokens, messages_tokens, system_tokens, tools_tokens
from tavern_loop.domain.history import Node, derive_messages, history_cut_points, surface_of
from tavern_loop.domain.pruner import PrunerConfig, prune_text
from tavern_loop.options import CompactionOptions
from tavern_runtime.secretscan import redact_secrets

INSTRUCTION = (
    "You are the compaction engine of this conversation. Condense everything above into exactly "
    "these Markdown sections: Primary Request and Intent, Key Technical Concepts, Files and "
    "Code, Errors and Fixes, Pending Jobs, Current Work, Next Step, Critical Context. Use terse "
    "bullets; write (none) for an empty section; keep names, paths and identifiers verbatim; do "
    "not mention summarisation; call no tools; merge any earlier <compacted-summary> instead of "
    "copying it."
)


def pressure(system: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> int:
    """Tokens the next request would carry (estimate)."""
    return system_tokens(system) + tools_tokens(tools) + messages_tokens(messages)


def threshold_tokens(context_window: int, options: CompactionOptions) -> int:
    return math.floor(context_window * options.threshold_ratio)


_SKIPPED = {
    "nothing_to_compact": "nothing to compact: no earlier part of the history may be replaced "
    "yet (the newest exchange is always kept)",
    "not_smaller": "not compacted: the summary ({after} tokens) was not smaller than what it "
    "would replace ({before} tokens)",
    "failed": "not compacted: the summariser failed ({error})",
    "busy": "busy: a turn is running; send /compact again when it has ended",
}


def skipped(
    trigger: str,
    reason: SkipReason,
    error: str = "",
    before: int | None = None,
    after: int | None = None,
) -> ContextCompactionSkippedPayload:
    """Why history was left as it was, with the words the user is shown."""
    error = redact_secrets(error)[:300]
    detail = _SKIPPED[reason].format(before=before, after=after, error=error)
    return ContextCompactionSkippedPayload.model_validate(
        {
            "trigger": trigger,
            "reason": reason,
            "detail": detail[:500],
            "tokens_before": before,
            "tokens_after": after,
        }
    )


def prune_plan(log: Sequence[SessionEvent], config: PrunerConfig) -> list[str]:
    """Call ids of tool results in history whose text the pruner would shorten."""
    messages = derive_messages(log)
    visible = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    return [
        e.payload.call_id
        for e in log
        if isinstance(e, ToolResult)
        and e.payload.call_id in visible
        and prune_text(str(visible[e.payload.call_id]), config) is not None
    ]


def prune_payload(
    call_ids: list[str], config: PrunerConfig, before: int, after: int, trigger: str
) -> ContextCompactedPayload:
    rule = PruningRule(
        threshold_chars=config.threshold_chars,
        head_chars=config.head_chars,
        tail_chars=config.tail_chars,
    )
    return ContextCompactedPayload(
        strategy="prune",
        trigger=trigger,
        pruned_call_ids=tuple(call_ids),
        pruning=rule,
        tokens_before=before,
        tokens_after=min(after, before),
    )


def summary_cut_points(log: Sequence[SessionEvent]) -> list[int]:
    """Where a new summary may end: cut points after what earlier summaries replaced."""
    done = max(
        (
            e.payload.replaces_through_seq or 0
            for e in log
            if isinstance(e, ContextCompacted) and e.payload.strategy == "summary"
        ),
        default=0,
    )
    return [seq for seq in history_cut_points(log) if seq > done]


def summary_cut(
    log: Sequence[SessionEvent], retain_tokens: int, surface: Sequence[Node] | None = None
) -> int | None:
    """The last seq to replace, keeping at least `retain_tokens` (and the newest unit) intact.

    One pass: a cut point falls where no call is open, so the history after it is exactly the
    surface's messages that come from later entries (the checkpoint counts by its own seq).
    `surface`: the log's surface nodes when the caller keeps them (else they are derived)."""
    cuts = summary_cut_points(log)
    nodes = surface_of(log).nodes() if surface is None else surface
    shown = sorted((n.seq, message_tokens(n.message)) for n in nodes)
    tail, index = 0, len(shown)
    for seq in reversed(cuts[:-1]):
        while index and shown[index - 1][0] > seq:
            index -= 1
            tail += shown[index][1]
        if tail >= retain_tokens:
            return seq
    return None


@dataclass
class Summariser:
    router: ProviderRouter
    max_tokens: int

    async def summarise(
        self, system: str, log: Sequence[SessionEvent], through: int
    ) -> FinalMessage:
        head = derive_messages([e for e in log if e.seq <= through])
        messages = [
            {"role": "system", "content": system},
            *head,
            {"role": "user", "content": INSTRUCTION},
        ]
        target = self.router.targets("summarise")[0]
        request = ChatRequest(
            model=target.model, messages=messages, max_tokens=self.max_tokens, route="summarise"
        )
        final: FinalMessage | None = None
        async for item in self.router.stream("summarise", request):
            if isinstance(item, FinalMessage):
                final = item
        if final is None or not final.content.strip():
            raise ValueError("the summariser returned no text")
        return final


def replaced_tokens(log: Sequence[SessionEvent], through: int) -> int:
    return messages_tokens(derive_messages([e for e in log if e.seq <= through]))


def summary_tokens(text: str) -> int:
    return message_tokens({"role": "user", "content": text})
