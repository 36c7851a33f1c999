"""Swipes and regenerations in the chat projection (SillyTavern's semantics).

An `assistant/message` with form `swipe` is another reply to the same user message: it becomes
a new swipe of the chat's last reply line and its active one (`mes`, `swipe_id`, `extra` and the
dates follow it, as SillyTavern's swipe does). Form `regenerate` replaces the last reply line
with the new reply (its swipes go). Either applies only when the chat ends with a reply; any
other reply is a new line.
"""

from __future__ import annotations

from datetime import tzinfo
from typing import Any

from tavern_events.message import AssistantMessage
from tavern_projector.domain import stformat
from tavern_projector.domain.chat import ChatState, assistant_line

SWIPE = "swipe"
REGENERATE = "regenerate"


def apply_reply(state: ChatState, event: AssistantMessage, tz: tzinfo) -> bool:
    """Fold a swipe or regeneration into the last reply line; False if it is not one."""
    if event.form not in (SWIPE, REGENERATE):
        return False
    index = _last_reply(state)
    line = assistant_line(state, event, tz)
    if index is None or line is None:
        return False
    current = state.messages[index]
    state.messages[index] = _swiped(current, line) if event.form == SWIPE else line
    state.encoded[index] = stformat.dumps(state.messages[index])
    state.last_seq = event.seq
    return True


def _last_reply(state: ChatState) -> int | None:
    if not state.messages or state.messages[-1].get("is_user", True):
        return None
    return len(state.messages) - 1


def _swiped(current: dict[str, Any], line: dict[str, Any]) -> dict[str, Any]:
    """`current` with `line` added as its newest, active swipe."""
    swipes = [*current.get("swipes", [current.get("mes", "")]), line["mes"]]
    info = [*current.get("swipe_info", []), *line["swipe_info"]]
    active = {k: line[k] for k in ("extra", "send_date", "mes", "gen_started", "gen_finished")}
    return {**current, **active, "swipes": swipes, "swipe_info": info, "swipe_id": len(swipes) - 1}
