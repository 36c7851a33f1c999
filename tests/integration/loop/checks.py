"""Invariants every session log of the loop must hold, and a provider that records requests.

`check_log` is run on every log a test produces: gapless seqs, turns and steps that never nest,
tool calls answered in model order. `check_requests` proves `derive_messages` of the log up to
each `agent/request` equals exactly what the model was sent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tavern_events.envelope import SessionEvent
from tavern_llm.base import ChatRequest, Provider, StreamItem
from tavern_llm.offline import OfflineProvider
from tavern_llm.router import ProviderRouter
from tavern_loop.domain.history import derive_messages

TURN_LEVEL = {"turn/start", "turn/stopping", "turn/end"}


def check_log(events: Sequence[SessionEvent]) -> None:
    """Gapless 1-based seqs; turn/start..turn/end and step/start..step/end never nest."""
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "log seqs have a gap"
    turn: int | None = None
    step: int | None = None
    last_turn = 0
    for event in events:
        kind = event.type
        if kind == "turn/start":
            assert turn is None, f"turn {event.turn} starts inside turn {turn} (seq {event.seq})"
            assert event.turn == last_turn + 1, "turn numbers must follow each other"
            turn = last_turn = event.turn
        elif kind == "turn/end":
            assert turn == event.turn, f"turn/end of {event.turn} outside it (seq {event.seq})"
            assert step is None, f"turn {turn} ends inside step {step}"
            turn = None
        elif kind == "step/start":
            assert turn == event.turn, f"step/start outside its turn at seq {event.seq}"
            assert step is None, f"step nests at seq {event.seq}"
            step = event.step
        elif kind == "step/end":
            assert (step, turn) == (event.step, event.turn), f"stray step/end at {event.seq}"
            step = None
        elif kind != "session/created":
            assert turn == event.turn, f"{kind} at seq {event.seq} outside its turn"
    assert turn is None, f"turn {turn} never ended"
    check_tool_pairs(events)


def check_tool_pairs(events: Sequence[SessionEvent]) -> None:
    """Each asked call has one tool/call and one tool/result, results in the model's order."""
    asked = [c.id for e in of_type(events, "assistant/message") for c in e.payload.tool_calls]
    called = [e.payload.call_id for e in of_type(events, "tool/call")]
    answered = [e.payload.call_id for e in of_type(events, "tool/result")]
    assert Counter(answered) == Counter(asked), "every asked call gets exactly one result"
    assert [c for c in asked if c in called] == called, "tool/call events follow model order"
    assert answered == asked, "tool/result events follow model order"


def of_type(events: Sequence[SessionEvent], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


def one(events: Sequence[SessionEvent], kind: str) -> Any:
    found = of_type(events, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def claims(events: Sequence[SessionEvent]) -> list[tuple[str, int, str]]:
    """(input_id, stream_seq, claiming event type) of every claim in log order."""
    return [
        (c.input_id, c.stream_seq, e.type)
        for e in events
        if e.type in ("turn/start", "step/start", "context/compaction-skipped")
        for c in e.payload.claimed
    ]


def user_texts(events: Sequence[SessionEvent], source: str = "user") -> list[str]:
    return [e.payload.text for e in of_type(events, "user/message") if e.source == source]


def in_turn(events: Sequence[SessionEvent], turn: int) -> list[SessionEvent]:
    return [e for e in events if e.turn == turn and e.type != "session/created"]


# --- what the model was sent --------------------------------------------------------------------


@dataclass
class RecordingProvider:
    """Wraps a provider and records every request it streams (optionally a smaller window)."""

    inner: Provider = field(default_factory=OfflineProvider)
    window: int | None = None
    requests: list[ChatRequest] = field(default_factory=list)
    name: str = ""
    offline: bool = False

    def __post_init__(self) -> None:
        self.name, self.offline = self.inner.name, self.inner.offline

    def context_window(self, model: str) -> int:
        return self.window or self.inner.context_window(model)

    def stream(self, request: ChatRequest) -> AsyncGenerator[StreamItem, None]:
        self.requests.append(request)
        return self.inner.stream(request)

    def chat(self) -> list[list[dict[str, Any]]]:
        return [r.messages for r in self.requests if r.route == "chat"]


def recording_router(provider: RecordingProvider) -> ProviderRouter:
    routes = {"chat": ["offline:offline-1"], "summarise": ["offline:offline-1"]}
    return ProviderRouter({"offline": provider}, routes)


def check_requests(events: Sequence[SessionEvent], sent: Sequence[list[dict[str, Any]]]) -> None:
    """The n-th chat request sent equals system + derive_messages(log before the n-th request)."""
    positions = [i for i, e in enumerate(events) if e.type == "agent/request"]
    assert len(positions) == len(sent), "one agent/request per chat request sent"
    for position, messages in zip(positions, sent, strict=True):
        request = events[position]
        system = {"role": "system", "content": request.payload.params["system"]}
        assert messages == [system, *derive_messages(events[:position])]
        assert request.payload.message_count == len(messages)
