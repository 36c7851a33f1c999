"""A provisioned bus and loop engines for the loop's integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext

from tavern_events import subjects
from tavern_events.envelope import SessionEvent
from tavern_events.ids import new_id
from tavern_events.input import (
    CancelInput,
    CommandInput,
    CommandInputPayload,
    MessageInput,
    MessageInputPayload,
)
from tavern_events.union import encode
from tavern_loop.dispatch import dispatch_consumer
from tavern_loop.engine import EngineParts, LoopEngine
from tavern_loop.options import LoopOptions
from tavern_loop.providers.offline import OfflineProvider
from tavern_loop.providers.router import ProviderRouter
from tavern_loop.tools.base import Tool
from tavern_loop.tools.builtin import builtin_tools
from tavern_runtime.provision import provision
from tavern_runtime.sessionlog import SessionLogReader
from tavern_runtime.settings import TavernSettings
from tests.support import eventually


@dataclass
class LoopBus:
    nc: Client
    js: JetStreamContext
    url: str
    data_dir: Path
    engines: list[LoopEngine] = field(default_factory=list)

    async def engine(
        self,
        options: LoopOptions | None = None,
        tools: Sequence[Tool] = (),
        router: ProviderRouter | None = None,
    ) -> LoopEngine:
        settings = TavernSettings(nats_url=self.url, data_dir=self.data_dir)
        router = router or offline_router()
        parts = EngineParts(options or LoopOptions(), router, [*builtin_tools(), *tools])
        engine = LoopEngine(settings, parts)
        await engine.start()
        self.engines.append(engine)
        return engine

    async def say(self, session_id: str, text: str, input_id: str | None = None) -> str:
        command = MessageInput(
            input_id=input_id or new_id(),
            session_id=session_id,
            ts=datetime.now(UTC),
            payload=MessageInputPayload(text=text),
        )
        await self._publish(command, "message")
        return command.input_id

    async def cancel(self, session_id: str) -> None:
        await self._publish(
            CancelInput(input_id=new_id(), session_id=session_id, ts=datetime.now(UTC)), "cancel"
        )

    async def command(self, session_id: str, name: str) -> None:
        payload = CommandInputPayload(name=name)
        command = CommandInput(
            input_id=new_id(), session_id=session_id, ts=datetime.now(UTC), payload=payload
        )
        await self._publish(command, "command")

    async def _publish(self, command: Any, kind: str) -> None:
        subject = subjects.session_input(command.session_id, kind)
        await self.js.publish(subject, encode(command), headers={"Nats-Msg-Id": command.input_id})

    async def log(self, session_id: str) -> list[SessionEvent]:
        return await SessionLogReader(self.js).events(session_id)

    async def turns_ended(self, session_id: str, count: int, timeout: float = 15) -> list[SessionEvent]:
        async def check() -> list[SessionEvent] | None:
            events = await self.log(session_id)
            ended = [e for e in events if e.type == "turn/end"]
            return events if len(ended) >= count else None

        return await eventually(check, timeout=timeout)


def offline_router() -> ProviderRouter:
    return ProviderRouter({"offline": OfflineProvider()}, {
        "chat": ["offline:offline-1"], "summarise": ["offline:offline-1"]})


def types(events: Sequence[SessionEvent], skip: Callable[[str], bool] = lambda t: False) -> list[str]:
    return [e.type for e in events if not skip(e.type)]


@pytest.fixture
async def bus(nats_url: str, tmp_path: Path) -> AsyncIterator[LoopBus]:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await provision(js, consumers=[dispatch_consumer()])
    env = LoopBus(nc, js, nats_url, tmp_path / "data")
    try:
        yield env
    finally:
        for engine in env.engines:
            await engine.stop(grace_s=2)
        await nc.close()
