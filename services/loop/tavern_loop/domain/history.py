"""`derive_messages(log)`: the model-visible history, folded from the session log alone.

Same log, same messages. Only user/message, assistant/message, tool/result and
context/compacted shape the history; everything else (chunks, boundaries, requests) does not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tavern_events.context import ContextCompacted
from tavern_events.envelope import SessionEvent
from tavern_events.message import AssistantMessage, UserMessage
from tavern_events.tool import ToolResult
from tavern_loop.domain.pruner import PrunerConfig, prune_text

CHECKPOINT_PREAMBLE = (
    "This is an automatically generated checkpoint condensing an earlier span of the "
    "conversation to free up context. Treat the captured context as established background and "
    "build on it without restating it. Continue the task directly from the messages that "
    "follow, without acknowledging this checkpoint."
)

Message = dict[str, Any]


@dataclass(frozen=True)
class Node:
    """One message of the surface as a request would carry it, with where it came from.

    `seq` is the log entry it comes from (a compaction checkpoint: the `context/compacted`
    event); `turn` and `source` are that entry's envelope fields."""

    seq: int
    message: Message
    turn: int = 0
    source: str = "host"


@dataclass
class _Entry:
    seq: int
    message: Message
    call_ids: tuple[str, ...] = ()  # assistant: the calls it made
    result_of: str | None = None  # tool: the call it answers
    turn: int = 0
    source: str = "host"


@dataclass
class Surface:
    """The history as a fold: apply events one by one, read the messages at any point."""

    entries: list[_Entry] = field(default_factory=list)
    summary: str | None = None
    summary_seq: int = 0
    generation: int = 0
    """How many replacements (compactions) shaped this surface."""

    def apply(self, event: SessionEvent) -> None:
        if isinstance(event, UserMessage):
            message = {"role": "user", "content": event.payload.text}
            self.entries.append(_Entry(event.seq, message, turn=event.turn, source=event.source))
        elif isinstance(event, AssistantMessage):
            self._assistant(event)
        elif isinstance(event, ToolResult):
            message = {
                "role": "tool",
                "tool_call_id": event.payload.call_id,
                "content": event.payload.content,
            }
            call_id = event.payload.call_id
            entry = _Entry(event.seq, message, (), call_id, event.turn, event.source)
            self.entries.append(entry)
        elif isinstance(event, ContextCompacted):
            self.generation += 1
            self._compacted(event)

    def _assistant(self, event: AssistantMessage) -> None:
        payload = event.payload
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in payload.tool_calls
        ]
        if not payload.content and not calls:
            return  # an empty answer only hosts usage
        message: Message = {"role": "assistant", "content": payload.content or None}
        if calls:
            message["tool_calls"] = calls
        ids = tuple(c.id for c in payload.tool_calls)
        entry = _Entry(event.seq, message, call_ids=ids, turn=event.turn, source=event.source)
        self.entries.append(entry)

    def _compacted(self, event: ContextCompacted) -> None:
        payload = event.payload
        if payload.strategy == "summary" and payload.summary and payload.replaces_through_seq:
            cut = payload.replaces_through_seq
            self.entries = [e for e in self.entries if e.seq > cut]
            self.summary, self.summary_seq = payload.summary, event.seq
        elif payload.strategy == "prune" and payload.pruning is not None:
            rule = payload.pruning
            config = PrunerConfig(rule.threshold_chars, rule.head_chars, rule.tail_chars)
            pruned = set(payload.pruned_call_ids)
            for entry in self.entries:
                if entry.result_of in pruned:
                    text = prune_text(str(entry.message["content"]), config)
                    if text is not None:
                        entry.message = {**entry.message, "content": text}

    def messages(self) -> list[Message]:
        return [node.message for node in self.nodes()]

    def nodes(self) -> list[Node]:
        """The surface in order: what `messages()` holds, each with its log seq."""
        answered = {e.result_of for e in self.entries if e.result_of}
        asked = {cid for e in self.entries for cid in e.call_ids}
        out: list[Node] = []
        if self.summary:
            checkpoint = {"role": "user", "content": checkpoint_text(self.summary)}
            out.append(Node(self.summary_seq, checkpoint, source="host"))
        for entry in self.entries:
            message = _paired(entry, asked, answered)
            if message is not None:
                out.append(Node(entry.seq, message, entry.turn, entry.source))
        return out


def _paired(entry: _Entry, asked: set[str], answered: set[str]) -> Message | None:
    """Drop the halves of a tool call whose other half is not in history: never separate them."""
    if entry.result_of is not None:
        return entry.message if entry.result_of in asked else None
    if not entry.call_ids:
        return entry.message
    calls = [c for c in entry.message["tool_calls"] if c["id"] in answered]
    if len(calls) == len(entry.call_ids):
        return entry.message
    message = {k: v for k, v in entry.message.items() if k != "tool_calls"}
    if calls:
        message["tool_calls"] = calls
    return message if message.get("content") or calls else None


def checkpoint_text(summary: str) -> str:
    """The user message that stands in for a compacted span of history."""
    return f"{CHECKPOINT_PREAMBLE}\n\n<compacted-summary>\n{summary}\n</compacted-summary>"


def derive_messages(log: Iterable[SessionEvent]) -> list[Message]:
    """The model history of a session log (system prompt and tool schemas are not included)."""
    return surface_of(log).messages()


def surface_of(log: Iterable[SessionEvent]) -> Surface:
    """The surface folded from a session log."""
    surface = Surface()
    for event in log:
        surface.apply(event)
    return surface


def history_cut_points(log: Iterable[SessionEvent]) -> list[int]:
    """Seqs after which history can be cut without separating a tool call from its result."""
    open_calls: set[str] = set()
    cuts: list[int] = []
    for event in log:
        if isinstance(event, AssistantMessage):
            open_calls.update(c.id for c in event.payload.tool_calls)
        elif isinstance(event, ToolResult):
            open_calls.discard(event.payload.call_id)
        else:
            continue
        if not open_calls:
            cuts.append(event.seq)
    return cuts
