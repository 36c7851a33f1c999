"""`derive_messages(log)`: the model-visible history, folded from the session log alone.

Same log, same messages. Only user/message, assistant/message, tool/result and
context/compacted shape the history; everything else (chunks, boundaries, requests) does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tavern_events.context import ContextCompacted
from tavern_events.envelope import SessionEvent
from tavern_events.message import AssistantMessage, UserMessage
from tavern_events.tool import ToolResult
from tavern_llm.tokens import message_tokens
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


@dataclass(eq=False)
class _Entry:
    seq: int
    message: Message
    call_ids: tuple[str, ...] = ()  # assistant: the calls it made
    result_of: str | None = None  # tool: the call it answers
    turn: int = 0
    source: str = "host"
    node: Node | None = None
    """The entry as the surface shows it now (None: dropped); kept until something it depends
    on changes."""
    tokens: int = 0
    """The token estimate of `node`'s message (0 when dropped)."""
    index: int = 0
    """Position in `Surface.entries`."""


@dataclass
class Surface:
    """The history as a fold: apply events one by one, read the messages at any point.

    Reading is incremental: an entry's shown form is recomputed only when it or the other half
    of one of its tool calls changed, so a long session costs each step about the same."""

    entries: list[_Entry] = field(default_factory=list)
    summary: str | None = None
    summary_seq: int = 0
    generation: int = 0
    """How many replacements (compactions) shaped this surface."""
    _asking: dict[str, _Entry] = field(default_factory=dict, repr=False)
    """Call id -> the assistant entry that made the call."""
    _answering: dict[str, list[_Entry]] = field(default_factory=dict, repr=False)
    """Call id -> the tool entries that answer it."""
    _stale: list[_Entry] = field(default_factory=list, repr=False)
    _nodes: list[Node] | None = field(default=None, repr=False)
    _messages: list[Message] = field(default_factory=list, repr=False)
    _built: int = field(default=0, repr=False)
    """How many entries `_nodes` covers (those after are new since)."""
    _tokens: int = field(default=0, repr=False)
    _checkpoint_tokens: int = field(default=0, repr=False)

    def apply(self, event: SessionEvent) -> None:
        if isinstance(event, UserMessage):
            message = {"role": "user", "content": event.payload.text}
            self._add(_Entry(event.seq, message, turn=event.turn, source=event.source))
        elif isinstance(event, AssistantMessage):
            self._assistant(event)
        elif isinstance(event, ToolResult):
            message = {
                "role": "tool",
                "tool_call_id": event.payload.call_id,
                "content": event.payload.content,
            }
            call_id = event.payload.call_id
            self._add(_Entry(event.seq, message, (), call_id, event.turn, event.source))
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
        if payload.speaker is not None:  # a group chat's member: whose line this is
            message["name"] = payload.speaker.name
        if calls:
            message["tool_calls"] = calls
        ids = tuple(c.id for c in payload.tool_calls)
        self._add(_Entry(event.seq, message, call_ids=ids, turn=event.turn, source=event.source))

    def _add(self, entry: _Entry) -> None:
        entry.index = len(self.entries)
        self.entries.append(entry)
        self._index(entry)
        self._stale.append(entry)
        for call_id in entry.call_ids:  # results seen before their call (a damaged log)
            self._stale.extend(self._answering.get(call_id, ()))
        if entry.result_of is not None and entry.result_of in self._asking:
            self._stale.append(self._asking[entry.result_of])

    def _index(self, entry: _Entry) -> None:
        for call_id in entry.call_ids:
            self._asking.setdefault(call_id, entry)
        if entry.result_of is not None:
            self._answering.setdefault(entry.result_of, []).append(entry)

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
        self._reindex()

    def _reindex(self) -> None:
        """After a replacement: every entry is shown anew."""
        self._asking, self._answering = {}, {}
        for index, entry in enumerate(self.entries):
            entry.node, entry.tokens, entry.index = None, 0, index
            self._index(entry)
        self._stale, self._nodes, self._tokens = list(self.entries), None, 0

    def messages(self) -> list[Message]:
        self._fresh()
        return list(self._messages)

    def nodes(self) -> list[Node]:
        """The surface in order: what `messages()` holds, each with its log seq."""
        return list(self._fresh())

    def tokens(self) -> int:
        """`messages_tokens(self.messages())`, kept up to date as events are applied."""
        self._fresh()
        return self._tokens + self._checkpoint_tokens

    def _fresh(self) -> list[Node]:
        if self._stale or self._nodes is None:
            self._refresh()
        assert self._nodes is not None
        return self._nodes

    def _refresh(self) -> None:
        """Show the stale entries anew. When only new entries joined the end (the usual step),
        their nodes are appended; otherwise the list is rebuilt."""
        rebuild = self._nodes is None
        for entry in self._stale:
            before = entry.node
            message = _paired(entry, self._asking, self._answering)
            if before is not None and message is before.message:
                continue
            tokens = message_tokens(message) if message is not None else 0
            self._tokens += tokens - entry.tokens
            entry.tokens = tokens
            entry.node = (
                Node(entry.seq, message, entry.turn, entry.source) if message is not None else None
            )
            rebuild = rebuild or entry.index < self._built
        self._stale = []
        if rebuild:
            self._rebuild()
            return
        assert self._nodes is not None
        fresh = [e.node for e in self.entries[self._built :] if e.node is not None]
        self._nodes.extend(fresh)
        self._messages.extend(node.message for node in fresh)
        self._built = len(self.entries)

    def _rebuild(self) -> None:
        out = [entry.node for entry in self.entries if entry.node is not None]
        self._checkpoint_tokens = 0
        if self.summary:
            checkpoint = {"role": "user", "content": checkpoint_text(self.summary)}
            out.insert(0, Node(self.summary_seq, checkpoint, source="host"))
            self._checkpoint_tokens = message_tokens(checkpoint)
        self._nodes, self._messages = out, [node.message for node in out]
        self._built = len(self.entries)


def _paired(
    entry: _Entry, asked: Mapping[str, object], answered: Mapping[str, object]
) -> Message | None:
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
