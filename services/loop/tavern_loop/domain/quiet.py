"""Sessions not asked again for a while: the consolidator said no style promotion awaits them.

One question a turn to the consolidator was most of what it did under load, and nearly every
answer is "none". After such an answer a session's turns skip the question for a quiet window;
a promotion proposed meanwhile shows at the first turn after the window.
"""

from __future__ import annotations

from datetime import datetime, timedelta

MAX_SESSIONS = 100_000
"""Entries kept at most (a replica's live sessions are far fewer); past it the oldest go."""


class QuietSessions:
    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self._until: dict[str, datetime] = {}
        self._limit = limit

    def __len__(self) -> int:
        return len(self._until)

    def holds(self, session_id: str, now: datetime) -> bool:
        """Whether the session is still in its quiet window at `now`."""
        until = self._until.get(session_id)
        if until is None:
            return False
        if now < until:
            return True
        del self._until[session_id]
        return False

    def hold(self, session_id: str, now: datetime, seconds: float) -> None:
        """Keep the session quiet for `seconds` from `now` (0 or less: not at all)."""
        if seconds <= 0:
            return
        self._until.pop(session_id, None)  # re-inserted last: the oldest hold stays first
        self._until[session_id] = now + timedelta(seconds=seconds)
        if len(self._until) > self._limit:
            self._forget(now)

    def _forget(self, now: datetime) -> None:
        for session_id in [s for s, until in self._until.items() if until <= now]:
            del self._until[session_id]
        while len(self._until) > self._limit:
            del self._until[next(iter(self._until))]
