"""Static gate: one loop. Only the turn runner streams from the model; profiles only plan."""

from __future__ import annotations

import re
from pathlib import Path

import tavern_loop

LOOP = Path(tavern_loop.__file__).parent
STREAMING = re.compile(r"\.stream\(|stream_reply\(|ChatRequest\(")


def test_only_the_turn_runner_and_compaction_call_the_model() -> None:
    callers = {
        path.relative_to(LOOP).as_posix()
        for path in LOOP.rglob("*.py")
        if "providers" not in path.parts and STREAMING.search(path.read_text())
    }
    assert callers == {"turn.py", "compaction.py", "streaming.py"}


def test_profiles_never_reach_a_provider_or_append_events() -> None:
    for path in (LOOP / "profiles").rglob("*.py"):
        text = path.read_text()
        assert "providers" not in text, path.name
        assert ".append(" not in text, path.name
        assert ".stage(" not in text, path.name
