"""One session's log as the runner holds it: the events so far, their fold, and appends."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tavern_events.envelope import SessionEvent
from tavern_loop.domain.state import SessionState, fold
from tavern_runtime.errors import TransientError
from tavern_runtime.logs import get_logger
from tavern_runtime.sessionlog import SessionLogWriter

log = get_logger(__name__)

APPEND_ATTEMPTS = 5


class HeldLog:
    """Appends are serialised and conditional on the last seq this holder has seen.

    A `ConcurrencyConflict` from the writer means another writer moved the log: the caller
    must stop (its lease is gone). An unknown outcome is retried with the same events, which
    the writer recognises if they already landed.
    """

    def __init__(self, session_id: str, writer: SessionLogWriter, events: list[SessionEvent]):
        self.session_id = session_id
        self.events = events
        self.state: SessionState = fold(session_id, events)
        self._writer = writer
        self._lock = asyncio.Lock()

    async def append(self, *events: SessionEvent) -> Sequence[SessionEvent]:
        async with self._lock:
            appended = await self._append(events)
            for event in appended:
                self.events.append(event)
                self.state.apply(event)
            return appended

    async def _append(self, events: Sequence[SessionEvent]) -> Sequence[SessionEvent]:
        delay = 0.05
        for attempt in range(1, APPEND_ATTEMPTS + 1):
            try:
                result = await self._writer.append(
                    self.session_id, events, expected_last=self.state.last_seq
                )
                return result.events
            except TransientError:
                if attempt == APPEND_ATTEMPTS:
                    raise
                log.warning("append_retry", session_id=self.session_id, attempt=attempt)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")
