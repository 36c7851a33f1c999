"""Pooled connections go back to the pool without a reset (`tavern_runtime.pg`): code that takes
a session-level advisory lock must mark its connection, or a lock it failed to release would
stay with a pooled connection for good."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SESSION_LOCK = re.compile(r"pg_(?:try_)?advisory_lock\(")


def test_every_session_lock_marks_its_connection() -> None:
    sources = [
        path
        for folder in ("libs", "services", "cli")
        for path in (ROOT / folder).rglob("*.py")
        if SESSION_LOCK.search(path.read_text(encoding="utf-8"))
    ]
    assert sources, "the scan found no session lock at all: the pattern is out of date"
    unmarked = [
        str(path.relative_to(ROOT))
        for path in sources
        if "holds_session_state(conn)" not in path.read_text(encoding="utf-8")
    ]
    assert unmarked == []
