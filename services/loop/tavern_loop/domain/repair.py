"""Closing a turn that a crashed holder left open: synthetic results, step/end, turn/end."""

from __future__ import annotations

from tavern_events.envelope import SessionEvent
from tavern_events.parts import ErrorInfo
from tavern_events.step import StepEnded, StepEndedPayload
from tavern_events.tool import ToolResult, ToolResultPayload
from tavern_events.turn import TurnEnded, TurnEndedPayload
from tavern_loop.domain.drafts import Drafter
from tavern_loop.domain.state import SessionState

OUTCOME_UNKNOWN = (
    "Error: the session was interrupted while this tool call was running; its outcome is "
    "unknown. Retry it only if it is read-only or idempotent; otherwise verify its effect or "
    "ask the user."
)
NOT_STARTED = (
    "Error: the session was interrupted before this tool call was recorded as started. Retry "
    "it if it is still needed."
)


def repair_events(state: SessionState, draft: Drafter) -> list[SessionEvent]:
    """The events that close `state.open_turn` as interrupted; empty when no turn is open."""
    turn = state.open_turn
    if turn is None:
        return []
    draft.turn, draft.step = turn.turn, turn.step
    events: list[SessionEvent] = []
    for call_id, name, started in turn.unanswered():
        code, text = (
            ("TOOL_OUTCOME_UNKNOWN", OUTCOME_UNKNOWN)
            if started
            else ("TOOL_NOT_STARTED", NOT_STARTED)
        )
        payload = ToolResultPayload(
            call_id=call_id,
            name=name,
            ok=False,
            content=text,
            error=ErrorInfo(code=code, message=text),
            synthetic=True,
        )
        events.append(draft(ToolResult, payload, source="host"))
    if turn.step_open:
        events.append(draft(StepEnded, StepEndedPayload(finish_reason="error")))
    ended = TurnEndedPayload(
        outcome="failed",
        reason="interrupted",
        steps=turn.step,
        error=ErrorInfo(code="interrupted", message="the previous holder of the session stopped"),
    )
    events.append(draft(TurnEnded, ended))
    return events
