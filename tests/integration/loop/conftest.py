"""A provisioned bus and loop engines for the loop's integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
from tavern_llm.offline import OfflineProvider
from tavern_llm.openai import OpenAIProvider
from tavern_llm.router import ProviderRouter
from tavern_loop.dispatch import DURABLE, dispatch_consumer
from tavern_loop.engine import EngineParts, LoopEngine
from tavern_loop.options import LoopOptions
from tavern_loop.tools.base import Tool
from tavern_loop.tools.builtin import builtin_tools
from tavern_runtime.provision import LEASES, BucketSpec, provision
from tavern_runtime.sessionlog import SessionLogReader
from tavern_runtime.settings import TavernSettings
from tests.integration.loop.checks import check_log
from tests.integration.loop.providers.openai_server import OpenAIServer
from tests.integration.loop.providers.test_openai_provider import fast_config
from tests.support import eventually, signed_nats


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
        settings = TavernSettings(nats_url=self.url, data_dir=self.data_dir, shutdown_grace_s=2)
        router = router or offline_router()
        parts = EngineParts(options or LoopOptions(), router, [*builtin_tools(), *tools])
        engine = LoopEngine(settings, parts)
        await engine.start()
        self.engines.append(engine)
        return engine

    async def say(
        self,
        session_id: str,
        text: str,
        input_id: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> str:
        """Publish a message input (as the operator unless `headers` carry another
        principal); returns its input_id (stored once it returns)."""
        return (await self.say_at(session_id, text, input_id, headers))[0]

    async def say_at(
        self,
        session_id: str,
        text: str,
        input_id: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[str, int]:
        """Publish a message input; returns its input_id and INPUTS stream sequence."""
        command = MessageInput(
            input_id=input_id or new_id(),
            session_id=session_id,
            ts=datetime.now(UTC),
            payload=MessageInputPayload(text=text),
        )
        seq = await self._publish(command, "message", headers)
        return command.input_id, seq

    async def cancel(self, session_id: str, headers: Mapping[str, str] | None = None) -> None:
        await self._publish(
            CancelInput(input_id=new_id(), session_id=session_id, ts=datetime.now(UTC)),
            "cancel",
            headers,
        )

    async def command(
        self,
        session_id: str,
        name: str,
        headers: Mapping[str, str] | None = None,
        args: dict[str, Any] | None = None,
    ) -> str:
        """Publish a command input; returns its input_id."""
        payload = CommandInputPayload(name=name, args=args or {})
        command = CommandInput(
            input_id=new_id(), session_id=session_id, ts=datetime.now(UTC), payload=payload
        )
        await self._publish(command, "command", headers)
        return command.input_id

    async def _publish(
        self, command: Any, kind: str, headers: Mapping[str, str] | None = None
    ) -> int:
        subject = subjects.session_input(command.session_id, kind)
        ack = await self.js.publish(
            subject, encode(command), headers={"Nats-Msg-Id": command.input_id, **(headers or {})}
        )
        return ack.seq

    async def dispatch_settled(self, timeout: float = 10) -> None:
        """Every input was delivered to the dispatcher and acked (none pending or in flight)."""

        async def check() -> bool:
            info = await self.js.consumer_info("INPUTS", DURABLE)
            return bool(info.num_pending == 0 and info.num_ack_pending == 0)

        await eventually(check, timeout=timeout)

    async def log(self, session_id: str) -> list[SessionEvent]:
        return await SessionLogReader(self.js).events(session_id)

    async def turns_ended(
        self, session_id: str, count: int, timeout: float = 15
    ) -> list[SessionEvent]:
        """The log once `count` turns have ended; checked for the loop's invariants."""

        async def check() -> list[SessionEvent] | None:
            events = await self.log(session_id)
            ended = [e for e in events if e.type == "turn/end"]
            return events if len(ended) >= count else None

        events = await eventually(check, timeout=timeout)
        assert events is not None
        check_log(events)
        return events

    async def logged(self, session_id: str, kind: str, timeout: float = 10) -> list[SessionEvent]:
        """The log once an event of type `kind` is in it."""

        async def check() -> list[SessionEvent] | None:
            events = await self.log(session_id)
            return events if any(e.type == kind for e in events) else None

        events = await eventually(check, timeout=timeout)
        assert events is not None
        return events


def offline_router() -> ProviderRouter:
    routes = {"chat": ["offline:offline-1"], "summarise": ["offline:offline-1"]}
    return ProviderRouter({"offline": OfflineProvider()}, routes)


def openai_router(server: OpenAIServer, **overrides: Any) -> ProviderRouter:
    """Chat and summarise routed to the loopback OpenAI server, with fast retries."""
    provider = OpenAIProvider(fast_config(server.base_url, **overrides))
    routes = {"chat": ["openai:fake-model"], "summarise": ["openai:fake-model"]}
    return ProviderRouter({"openai": provider}, routes)


def sent(server: OpenAIServer) -> list[list[dict[str, Any]]]:
    """The messages of every request the server saw, in order."""
    return [r.body["messages"] for r in server.requests]


def types(
    events: Sequence[SessionEvent], skip: Callable[[str], bool] = lambda t: False
) -> list[str]:
    return [e.type for e in events if not skip(e.type)]


@asynccontextmanager
async def provisioned_bus(
    nats_url: str, data_dir: Path, lease_ttl_s: float = LEASES.ttl_s
) -> AsyncIterator[LoopBus]:
    """Streams, the dispatch consumer and a lease bucket with `lease_ttl_s`; engines stop at
    the end."""
    nc = await signed_nats(nats_url)
    js = nc.jetstream()
    leases = BucketSpec(LEASES.name, ttl_s=lease_ttl_s, description=LEASES.description)
    await provision(js, consumers=[dispatch_consumer()], buckets=[leases])
    env = LoopBus(nc, js, nats_url, data_dir)
    try:
        yield env
    finally:
        for engine in env.engines:
            await engine.stop(grace_s=2)
        await nc.close()


@pytest.fixture
async def bus(nats_url: str, tmp_path: Path) -> AsyncIterator[LoopBus]:
    async with provisioned_bus(nats_url, tmp_path / "data") as env:
        yield env
