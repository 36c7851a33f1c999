"""Swipes and regenerations in the chat projection (SillyTavern's semantics).

An `assistant/message` with form `swipe` is another reply to the same user message: it becomes
a new swipe of the chat's last reply line and its active one (`mes`, `swipe_id`, `extra` and the
dates follow it, as SillyTavern's swipe does). Form `regenerate` replaces the last reply line
with the new reply (its swipes go). Either applies only when the chat ends with a reply; any
other reply is a new line. Pure over chat lines: the chat fold (`chat.py`) applies it.
"""

from __future__ import annotations

from typing import Any

SWIPE = "swipe"
REGENERATE = "regenerate"
FORMS = (SWIPE, REGENERATE)


def last_reply(messages: list[dict[str, Any]]) -> int | None:
    """The index of the chat's last line when it is a reply (a swipe applies only then)."""
    if not messages or messages[-1].get("is_user", True):
        return None
    return len(messages) - 1


def folded(current: dict[str, Any], line: dict[str, Any], form: str) -> dict[str, Any]:
    """The last reply line after the new reply `line`: a new active swipe of it (`swipe`),
    or `line` in its place (`regenerate`, its swipes go)."""
    return _swiped(current, line) if form == SWIPE else line


def _swiped(current: dict[str, Any], line: dict[str, Any]) -> dict[str, Any]:
    """`current` with `line` added as its newest, active swipe."""
    swipes = [*current.get("swipes", [current.get("mes", "")]), line["mes"]]
    info = [*current.get("swipe_info", []), *line["swipe_info"]]
    active = {k: line[k] for k in ("extra", "send_date", "mes", "gen_started", "gen_finished")}
    return {**current, **active, "swipes": swipes, "swipe_info": info, "swipe_id": len(swipes) - 1}
