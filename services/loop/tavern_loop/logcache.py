"""Session logs a runner let go, kept for the session's next runner on this replica.

A runner lets its session go when the session has been idle a moment, so a conversation at a
human pace starts a new runner for nearly every message. Without this, each of those would read
and decode the session's whole log again: a long chat's history, every turn. With it, the next
runner reads only what was stored after the kept log (what another replica appended, if it
took the session meanwhile) and checks that it continues the kept log.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from tavern_events.envelope import SessionEvent


@dataclass(frozen=True)
class KnownLog:
    """A session's log up to the message stored at `stream_seq`."""

    events: tuple[SessionEvent, ...]
    stream_seq: int

    def extended(self, newer: Sequence[SessionEvent]) -> list[SessionEvent] | None:
        """The log with `newer` (read after `stream_seq`) appended, or None when `newer` does
        not continue it seq by seq (the kept log is then not to be trusted)."""
        last = self.events[-1].seq if self.events else 0
        for offset, event in enumerate(newer, start=1):
            if event.seq != last + offset:
                return None
        return [*self.events, *newer]


class LogCache:
    """Bounded by the number of events kept; the least recently let go is dropped first.

    A log is taken out while a runner holds the session (that runner owns the only copy)."""

    def __init__(self, max_events: int = 50_000) -> None:
        self.max_events = max_events
        self._logs: OrderedDict[str, KnownLog] = OrderedDict()
        self._events = 0

    def __len__(self) -> int:
        return len(self._logs)

    @property
    def events(self) -> int:
        return self._events

    def keep(self, session_id: str, events: Sequence[SessionEvent], stream_seq: int) -> None:
        self.take(session_id)
        if not events or len(events) > self.max_events:
            return
        self._logs[session_id] = KnownLog(tuple(events), stream_seq)
        self._events += len(events)
        while self._events > self.max_events:
            _, dropped = self._logs.popitem(last=False)
            self._events -= len(dropped.events)

    def take(self, session_id: str) -> KnownLog | None:
        known = self._logs.pop(session_id, None)
        if known is not None:
            self._events -= len(known.events)
        return known
