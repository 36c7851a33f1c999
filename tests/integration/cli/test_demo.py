from __future__ import annotations

import io

import pytest

from tavern_cli.demo import SCRIPT, play
from tests.integration.loop.conftest import LoopBus

pytestmark = pytest.mark.integration


async def test_demo_plays_every_scripted_turn_through_the_loop(bus: LoopBus) -> None:
    await bus.engine()
    out = io.StringIO()
    result = await play(bus.url, out=out, colour=False, turn_timeout=20)
    text = out.getvalue()
    assert result.turns == len(SCRIPT)
    assert result.outcomes[0] == "completed"
    assert "you: Hello! I'm Ada" in text
    assert "assistant:" in text
    assert "→ memory_write(" in text or "memory_write" in text
    events = await bus.log(result.session_id)
    assert sum(e.type == "turn/end" for e in events) == len(SCRIPT)
