from __future__ import annotations

import itertools
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from tavern_events.context import ContextCompacted, ContextCompactedPayload, PruningRule
from tavern_events.envelope import SessionEvent
from tavern_events.message import (
    AssistantMessage,
    AssistantMessagePayload,
    UserMessage,
    UserMessagePayload,
)
from tavern_events.parts import ClaimedInput, ToolCallPart
from tavern_events.step import StepStarted, StepStartedPayload
from tavern_events.tool import ToolCall, ToolCallPayload, ToolResult, ToolResultPayload
from tavern_events.turn import TurnStarted, TurnStartedPayload
from tavern_llm.tokens import messages_tokens
from tavern_loop.compaction import summary_cut, summary_cut_points
from tavern_loop.domain.drafts import Drafter
from tavern_loop.domain.history import (
    CHECKPOINT_PREAMBLE,
    Surface,
    checkpoint_text,
    derive_messages,
    history_cut_points,
)
from tavern_loop.domain.pruner import PrunerConfig, prune_text
from tavern_loop.domain.repair import repair_events
from tavern_loop.domain.state import fold

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Log:
    """Builds a log with gapless seqs."""

    def __init__(self) -> None:
        counter = itertools.count(1)
        self.draft = Drafter("s1", clock=lambda: T0, new_id=lambda: f"e{next(counter)}")
        self.events: list[SessionEvent] = []

    def add(self, cls: type[SessionEvent], payload: object, **kw: object) -> SessionEvent:
        event = self.draft(cls, payload, seq=len(self.events) + 1, **kw)
        self.events.append(event)
        return event


def user(log: Log, text: str) -> None:
    log.add(UserMessage, UserMessagePayload(text=text), source="user")


def assistant(log: Log, text: str, *calls: str) -> None:
    parts = tuple(ToolCallPart(id=c, name="t", arguments="{}") for c in calls)
    log.add(AssistantMessage, AssistantMessagePayload(content=text, tool_calls=parts))


def result(log: Log, call_id: str, content: str = "ok") -> None:
    log.add(ToolResult, ToolResultPayload(call_id=call_id, name="t", ok=True, content=content))


def test_derive_messages_maps_the_conversation_in_order() -> None:
    log = Log()
    user(log, "hi")
    assistant(log, "", "c1")
    result(log, "c1", "42")
    assistant(log, "the answer is 42")
    assert derive_messages(log.events) == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "assistant", "content": "the answer is 42"},
    ]


def test_derive_messages_is_deterministic_and_skips_empty_answers() -> None:
    log = Log()
    user(log, "hi")
    assistant(log, "")
    assert derive_messages(log.events) == derive_messages(list(log.events))
    assert derive_messages(log.events) == [{"role": "user", "content": "hi"}]


def test_a_tool_call_is_never_separated_from_its_result() -> None:
    log = Log()
    user(log, "go")
    assistant(log, "working", "c1", "c2")
    result(log, "c1")
    messages = derive_messages(log.events)
    assert messages[1]["tool_calls"][0]["id"] == "c1"
    assert len(messages[1]["tool_calls"]) == 1
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]


def test_summary_compaction_replaces_the_prefix_without_editing_the_log() -> None:
    log = Log()
    user(log, "old question")
    assistant(log, "old answer")
    payload = ContextCompactedPayload(
        strategy="summary",
        trigger="pressure",
        summary="S",
        replaces_through_seq=2,
        tokens_before=10,
        tokens_after=5,
    )
    log.add(ContextCompacted, payload)
    user(log, "new question")
    messages = derive_messages(log.events)
    assert messages[0]["content"].startswith(CHECKPOINT_PREAMBLE)
    assert "<compacted-summary>\nS\n</compacted-summary>" in messages[0]["content"]
    assert messages[1:] == [{"role": "user", "content": "new question"}]
    assert len(log.events) == 4


def test_prune_compaction_replays_the_recorded_rule() -> None:
    log = Log()
    user(log, "go")
    assistant(log, "", "c1")
    result(log, "c1", "a" * 100 + "b" * 100)
    rule = PruningRule(threshold_chars=80, head_chars=10, tail_chars=5)
    payload = ContextCompactedPayload(
        strategy="prune",
        trigger="pressure",
        pruned_call_ids=("c1",),
        pruning=rule,
        tokens_before=60,
        tokens_after=20,
    )
    log.add(ContextCompacted, payload)
    tool = derive_messages(log.events)[2]
    assert tool["content"] == "a" * 10 + rule.marker + "b" * 5


def test_cut_points_only_fall_where_no_call_is_open() -> None:
    log = Log()
    user(log, "go")
    assistant(log, "", "c1")
    result(log, "c1")
    assistant(log, "done")
    assert history_cut_points(log.events) == [3, 4]


def test_state_folds_cursor_from_turn_and_step_claims() -> None:
    log = Log()
    log.add(
        TurnStarted,
        TurnStartedPayload(claimed=(ClaimedInput(input_id="i1", stream_seq=4),)),
        turn=1,
    )
    log.add(
        StepStarted,
        StepStartedPayload(claimed=(ClaimedInput(input_id="i2", stream_seq=9),)),
        turn=1,
        step=1,
    )
    state = fold("s1", log.events)
    assert state.input_cursor == 9
    assert state.claimed_ids == {"i1", "i2"}
    assert state.open_turn is not None
    assert state.open_turn.step_open


def test_repair_closes_an_interrupted_turn_with_synthetic_results() -> None:
    log = Log()
    log.add(TurnStarted, TurnStartedPayload(), turn=1)
    log.add(StepStarted, StepStartedPayload(), turn=1, step=1)
    assistant(log, "", "c1", "c2")
    log.add(ToolCall, ToolCallPayload(call_id="c1", name="t", arguments="{}"), turn=1, step=1)
    state = fold("s1", log.events)
    repaired = repair_events(state, log.draft)
    assert [e.type for e in repaired] == ["tool/result", "tool/result", "step/end", "turn/end"]
    codes = [e.payload.error.code for e in repaired[:2]]
    assert codes == ["TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"]
    end = repaired[-1].payload
    assert (end.outcome, end.reason, end.steps) == ("failed", "interrupted", 1)
    for event in repaired:
        state.apply(event.model_copy(update={"seq": state.last_seq + 1}))
    assert state.open_turn is None
    assert repair_events(state, log.draft) == []


# --- the incremental surface against a from-scratch reference --------------------------------


def reference_messages(events: list[SessionEvent]) -> list[dict[str, object]]:
    """The history recomputed from nothing at every read, the plain way."""
    entries: list[tuple[int, dict[str, object], tuple[str, ...], str | None]] = []
    summary: str | None = None
    for event in events:
        if isinstance(event, UserMessage):
            entries.append((event.seq, {"role": "user", "content": event.payload.text}, (), None))
        elif isinstance(event, AssistantMessage):
            p = event.payload
            calls = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": "{}"}}
                for c in p.tool_calls
            ]
            if not p.content and not calls:
                continue
            message: dict[str, object] = {"role": "assistant", "content": p.content or None}
            if calls:
                message["tool_calls"] = calls
            entries.append((event.seq, message, tuple(c.id for c in p.tool_calls), None))
        elif isinstance(event, ToolResult):
            p2 = event.payload
            tool: dict[str, object] = {
                "role": "tool",
                "tool_call_id": p2.call_id,
                "content": p2.content,
            }
            entries.append((event.seq, tool, (), p2.call_id))
        elif isinstance(event, ContextCompacted):
            c = event.payload
            if c.strategy == "summary" and c.summary and c.replaces_through_seq:
                entries = [e for e in entries if e[0] > c.replaces_through_seq]
                summary = c.summary
            elif c.strategy == "prune" and c.pruning is not None:
                rule = c.pruning
                config = PrunerConfig(rule.threshold_chars, rule.head_chars, rule.tail_chars)
                kept = []
                for seq, m, ids, of in entries:
                    if of in c.pruned_call_ids:
                        text = prune_text(str(m["content"]), config)
                        m = {**m, "content": text} if text is not None else m
                    kept.append((seq, m, ids, of))
                entries = kept
    asked = {i for _, _, ids, _ in entries for i in ids}
    answered = {of for _, _, _, of in entries if of}
    out: list[dict[str, object]] = []
    if summary:
        out.append({"role": "user", "content": checkpoint_text(summary)})
    for _, m, ids, of in entries:
        if of is not None:
            if of in asked:
                out.append(m)
            continue
        if not ids:
            out.append(m)
            continue
        calls = [c for c in m["tool_calls"] if c["id"] in answered]  # type: ignore[attr-defined]
        if len(calls) == len(ids):
            out.append(m)
            continue
        shown = {k: v for k, v in m.items() if k != "tool_calls"}
        if calls:
            shown["tool_calls"] = calls
        if shown.get("content") or calls:
            out.append(shown)
    return out


def apply_op(log: Log, op: tuple[object, ...], made: int) -> int:
    """Add the events of one generated operation; how many calls were made so far."""
    if op[0] == "user":
        user(log, str(op[1]))
    elif op[0] == "assistant":
        count = int(op[2])  # type: ignore[call-overload]
        assistant(log, str(op[1]), *(f"c{made + i}" for i in range(count)))
        made += count
    elif op[0] == "result":
        result(log, f"c{op[1]}", str(op[2]))
    elif op[0] == "summary":
        through = min(int(op[1]), len(log.events))  # type: ignore[call-overload]
        if through:
            payload = ContextCompactedPayload(
                strategy="summary",
                trigger="pressure",
                summary=f"S{through}",
                replaces_through_seq=through,
                tokens_before=10,
                tokens_after=5,
            )
            log.add(ContextCompacted, payload)
    else:
        rule = PruningRule(threshold_chars=80, head_chars=10, tail_chars=5)
        payload = ContextCompactedPayload(
            strategy="prune",
            trigger="pressure",
            pruned_call_ids=tuple(f"c{i}" for i in op[1]),  # type: ignore[attr-defined]
            pruning=rule,
            tokens_before=10,
            tokens_after=5,
        )
        log.add(ContextCompacted, payload)
    return made


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.text("ab ", max_size=6)),
        st.tuples(st.just("assistant"), st.text("xy", max_size=3), st.integers(0, 3)),
        st.tuples(st.just("result"), st.integers(0, 12), st.text("r", min_size=0, max_size=120)),
        st.tuples(st.just("summary"), st.integers(1, 40)),
        st.tuples(st.just("prune"), st.lists(st.integers(0, 12), min_size=1, max_size=3)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(_ops)
def test_the_incremental_surface_equals_a_fresh_computation_after_every_event(
    ops: list[tuple[object, ...]],
) -> None:
    log, surface, made = Log(), Surface(), 0
    for op in ops:
        before = len(log.events)
        made = apply_op(log, op, made)
        for event in log.events[before:]:
            surface.apply(event)
        expected = reference_messages(log.events)
        assert surface.messages() == expected
        assert surface.tokens() == messages_tokens(expected)
        assert derive_messages(log.events) == expected


def reference_summary_cut(log: list[SessionEvent], retain_tokens: int) -> int | None:
    """The definition: the newest cut whose tail, derived alone, keeps `retain_tokens`."""
    cuts = summary_cut_points(log)
    for seq in reversed(cuts[:-1]):
        if messages_tokens(derive_messages([e for e in log if e.seq > seq])) >= retain_tokens:
            return seq
    return None


@settings(max_examples=300, deadline=None)
@given(_ops, st.integers(0, 400))
def test_the_one_pass_summary_cut_equals_its_definition(
    ops: list[tuple[object, ...]], retain: int
) -> None:
    log, made = Log(), 0
    for op in ops:
        if op[0] == "result" and int(op[1]) >= made:  # type: ignore[call-overload]
            continue  # a result before its call: a log the loop never writes (it calls first)
        made = apply_op(log, op, made)
    assert summary_cut(log.events, retain) == reference_summary_cut(log.events, retain)
