"""The chat of an `st` session as SillyTavern sees it (pure): user lines and replies with swipes.

Folded from the session log with the same rules as the projector's chat JSONL: a user line is a
`user/message` from the user; a reply is an `assistant/message` with text and no tool call. A
reply with form `swipe` adds a swipe to the last reply and becomes its active text; a reply with
form `regenerate` replaces the last reply (its swipes go). An entry keeps the seq of the event
that opened it, so a request can name its history as a range of seqs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tavern_events.envelope import SessionEvent
from tavern_events.message import AssistantMessage, UserMessage
from tavern_events.request import AgentRequest

SWIPE = "swipe"
REGENERATE = "regenerate"


@dataclass(frozen=True)
class ChatEntry:
    seq: int
    is_user: bool
    text: str
    name: str | None = None
    swipes: tuple[str, ...] = ()
    speaker: str | None = None
    """A group chat reply's member: SillyTavern sends it as `Name: text` (names behaviour
    default, in a group)."""

    def message(self) -> dict[str, str]:
        text = f"{self.speaker}: {self.text}" if self.speaker else self.text
        return {"role": "user" if self.is_user else "assistant", "content": text}


def st_chat(log: Iterable[SessionEvent]) -> list[ChatEntry]:
    """Every chat line of the log, oldest first, replies at their active swipe."""
    entries: list[ChatEntry] = []
    for event in log:
        if isinstance(event, UserMessage):
            _user(entries, event)
        elif isinstance(event, AssistantMessage):
            _reply(entries, event)
    return entries


def _user(entries: list[ChatEntry], event: UserMessage) -> None:
    text = event.payload.text
    if event.source == "user" and text.strip():
        entries.append(ChatEntry(event.seq, True, text, event.payload.name))


def _reply(entries: list[ChatEntry], event: AssistantMessage) -> None:
    p = event.payload
    if p.tool_calls or not p.content.strip():
        return
    last = last_reply(entries)
    if event.form == SWIPE and last is not None:
        swipes = (*entries[last].swipes, p.content)
        entries[last] = replace(entries[last], text=p.content, swipes=swipes)
    elif event.form == REGENERATE and last is not None:
        entries[last] = replace(entries[last], text=p.content, swipes=(p.content,))
    else:
        speaker = p.speaker.name if p.speaker is not None else None
        entries.append(ChatEntry(event.seq, False, p.content, swipes=(p.content,), speaker=speaker))


def last_reply(entries: Sequence[ChatEntry]) -> int | None:
    """The index of the chat's last line if it is a reply (what a swipe would change)."""
    return len(entries) - 1 if entries and not entries[-1].is_user else None


def reply_target(entries: Sequence[ChatEntry], command: str) -> str | None:
    """Why a swipe or regenerate cannot run now, or None: it needs a reply to a user line."""
    if last_reply(entries) is None:
        return f"/{command}: the chat does not end with a reply; send a message first"
    if not any(e.is_user for e in entries):
        return f"/{command}: there is no user message to answer again"
    return None


def history_range(
    entries: Sequence[ChatEntry], first: int | None, last: int | None
) -> list[ChatEntry]:
    """The entries whose seq lies in `[first, last]`; no range (None) is no history."""
    if first is None or last is None:
        return []
    return [e for e in entries if first <= e.seq <= last]


def past_activations(
    log: Iterable[SessionEvent], entries: Sequence[ChatEntry]
) -> list[dict[str, Any]]:
    """The world-info entries each earlier st request activated, with the chat's length then
    (`{at, ids}`, oldest first): what sticky and cooldown follow from, read from the log."""
    found = []
    for event in log:
        if not isinstance(event, AgentRequest):
            continue
        record = event.payload.params.get("st")
        lore = record.get("lore") if isinstance(record, dict) else None
        if not isinstance(record, dict) or not isinstance(lore, list) or not lore:
            continue
        last = record.get("last")
        at = sum(1 for e in entries if isinstance(last, int) and e.seq <= last)
        found.append({"at": at, "ids": [str(i) for i in lore]})
    return found
