"""A group chat as one member sees it (pure): the chat's lines by speaker, and the request
history rewritten for the member about to speak.

The member's own replies stay `assistant`; the other members' lines become named `user` lines
(`Cael: ...`), so each request is the speaking member's own voice answering the others.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from tavern_events.envelope import SessionEvent
from tavern_events.message import AssistantMessage, UserMessage
from tavern_events.tool import ToolResult
from tavern_loop.domain.history import Message
from tavern_loop.domain.speakers import Line


def chat_lines(events: Iterable[SessionEvent]) -> list[Line]:
    """What was said, in order: the user's messages (speaker None) and the members' replies
    (speaker: the member's character id). Injected context and empty replies are not lines."""
    lines: list[Line] = []
    for event in events:
        if isinstance(event, UserMessage) and event.form is None:
            lines.append(Line(None, event.payload.text))
        elif isinstance(event, AssistantMessage) and event.payload.content:
            lines.append(Line(event.actor_id, event.payload.content))
    return lines


SPEAKER_CHOOSE = "tavern_speaker_choose"


def picked_next(events: Iterable[SessionEvent]) -> str | None:
    """The member the model chose to speak next in these events: the last successful
    `tavern_speaker_choose` result's `next` (read from the log, so a replay picks the same)."""
    picked = None
    for event in events:
        if not isinstance(event, ToolResult) or event.payload.name != SPEAKER_CHOOSE:
            continue
        if not event.payload.ok:
            continue
        try:
            found = json.loads(event.payload.content)["next"]["characterId"]
        except (ValueError, KeyError, TypeError):
            continue
        picked = found if isinstance(found, str) else picked
    return picked


RECALL_FORM = "recall"


def others_recall(events: Iterable[SessionEvent], member: str) -> frozenset[str]:
    """The recall texts the log holds for the other members only (`reach: member`: each
    member's own memory is recalled for it, so another member's request leaves it out). A text
    recalled for `member` too stays."""
    theirs: set[str] = set()
    own: set[str] = set()
    for event in events:
        if isinstance(event, UserMessage) and event.form == RECALL_FORM and event.actor_id:
            (own if event.actor_id == member else theirs).add(event.payload.text)
    return frozenset(theirs - own)


def for_member(
    messages: list[Message], speaker: str, hidden: frozenset[str] = frozenset()
) -> list[Message]:
    """`messages` for member `speaker` (a display name): the others' replies as named lines,
    without the user messages whose text is `hidden` (the others' own recall)."""
    shown: list[Message] = []
    for message in messages:
        if message.get("role") == "user" and message.get("content") in hidden:
            continue
        name = message.get("name")
        if message.get("role") != "assistant" or name is None:
            shown.append(message)
            continue
        own = {k: v for k, v in message.items() if k != "name"}
        if name == speaker or own.get("tool_calls"):
            shown.append(own)
        else:
            shown.append({"role": "user", "content": f"{name}: {own.get('content') or ''}"})
    return shown


GROUP_NOTE = (
    "[Group chat with {others}. Write the next reply only as {name}; the others' lines are "
    'shown as "Name: text".]'
)


def group_note(name: str, others: list[str]) -> str:
    """The system prompt's last line for member `name` (SillyTavern's group nudge)."""
    return GROUP_NOTE.format(name=name, others=", ".join(others) or "nobody else")
