"""Profiles on real servers: the loop in process (offline model), with the projector and the
ledger where a test needs their RPCs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tavern_events import subjects
from tavern_events.envelope import SessionEvent
from tavern_events.ids import new_id
from tavern_events.input import CommandInput, CommandInputPayload
from tavern_events.union import encode
from tavern_loop.domain.rebuild import rebuild_request
from tavern_loop.engine import LoopEngine
from tests.integration.ledger.stores.conftest import Ledger, start_ledger
from tests.integration.loop.conftest import LoopBus, bus  # noqa: F401 - the `bus` fixture
from tests.integration.projector.conftest import idle_projector, projector  # noqa: F401


async def command(loop: LoopBus, target: str, name: str, /, **args: Any) -> str:
    """Publish a command input with arguments to session `target`; returns its input id."""
    payload = CommandInputPayload(name=name, args=args)
    sent = CommandInput(input_id=new_id(), session_id=target, ts=datetime.now(UTC), payload=payload)
    subject = subjects.session_input(target, "command")
    await loop.js.publish(subject, encode(sent), headers={"Nats-Msg-Id": sent.input_id})
    return sent.input_id


def ended(events: Sequence[SessionEvent], turn: int) -> Any:
    """The turn/end of `turn`."""
    (found,) = [e for e in events if e.type == "turn/end" and e.turn == turn]
    return found


def requests(events: Sequence[SessionEvent]) -> list[Any]:
    return [e for e in events if e.type == "agent/request"]


def check_rebuilt(events: Sequence[SessionEvent], sent: Sequence[list[dict[str, Any]]]) -> None:
    """Every chat request sent equals the request rebuilt from the log alone."""
    logged = requests(events)
    assert len(logged) == len(sent), "one agent/request per request sent"
    for request, messages in zip(logged, sent, strict=True):
        assert rebuild_request(events, request.seq) == messages, f"request at seq {request.seq}"


async def stop(loop: LoopBus, engine: LoopEngine) -> None:
    """Stop one engine now (its leases are released), as a configuration change would."""
    await engine.stop(grace_s=2)
    loop.engines.remove(engine)


@pytest.fixture
async def ledger(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Ledger]:
    async for running in start_ledger(nats_url, database_url, tmp_path / "ledger"):
        yield running
