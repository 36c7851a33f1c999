"""The projector in process against real servers, beside loop engines that write real logs."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from nats.js.api import Header
from nats.js.errors import NotFoundError

from tavern_events.envelope import SessionEvent
from tavern_events.ids import new_id
from tavern_events.session import SessionCreated, SessionCreatedPayload
from tavern_events.streams import SESSIONS
from tavern_projector import catalog
from tavern_projector.app import build_app
from tavern_projector.chatfiles import ChatFiles
from tavern_projector.config import ProjectorSettings
from tavern_projector.core import options_of
from tavern_projector.framework import checkpoints
from tavern_runtime.provision import provision
from tavern_runtime.service import serve
from tavern_runtime.sessionlog import SessionLogWriter
from tests.integration.loop.conftest import LoopBus, provisioned_bus
from tests.support import eventually


@dataclass
class Projector:
    bus: LoopBus
    settings: ProjectorSettings
    pool: Any
    stop: asyncio.Event | None = None
    task: asyncio.Task[int] | None = None

    @property
    def chats(self) -> Path:
        return self.settings.chats_dir

    async def start(self) -> None:
        self.stop = asyncio.Event()
        app = build_app(self.settings)
        self.task = asyncio.create_task(serve("projector", app, self.settings, stop=self.stop))
        await eventually(self._pings, timeout=20)

    async def halt(self) -> None:
        if self.task is not None and self.stop is not None:
            self.stop.set()
            await asyncio.wait_for(self.task, 30)
            self.task = None

    async def _pings(self) -> bool:
        try:
            reply = await self.bus.nc.request("tavern.rpc.projector.ping", b"{}", timeout=1)
        except Exception:
            return False
        return bool(json.loads(reply.data).get("ok"))

    async def rpc(
        self, operation: str, body: dict[str, Any], headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Ask the projector as the operator (the bus client's principal) unless `headers`
        carry another."""
        reply = await self.bus.nc.request(
            f"tavern.rpc.projector.{operation}",
            json.dumps(body).encode(),
            timeout=5,
            headers=None if headers is None else dict(headers),
        )
        found: dict[str, Any] = json.loads(reply.data)
        return found

    async def caught_up(self, *names: str, timeout: float = 15) -> None:
        """Every named projection's checkpoint has reached the last stored entry it reads.

        (A consumer's pending counts alone can read 0/0 for a moment right after a publish.)
        """
        chosen = names or catalog.NAMES
        options = options_of(self.settings)

        async def check() -> bool:
            marks = await checkpoints(self.pool)
            for name in chosen:
                projection = catalog.build(name, options)
                last = await self.last_stored(projection.stream, projection.filters)
                if last and (name not in marks or marks[name].stream_seq < last):
                    return False
            return True

        await eventually(check, timeout=timeout)

    async def last_stored(self, stream: str, filters: tuple[str, ...]) -> int:
        found = 0
        for subject in filters:
            try:
                found = max(found, (await self.bus.js.get_last_msg(stream, subject)).seq or 0)
            except NotFoundError:
                continue
        return found

    async def create_session(self, session_id: str, **binding: Any) -> None:
        """A session/created written first, as a client that binds a character would."""
        binding.setdefault("chat_id", session_id)
        payload = SessionCreatedPayload(
            architecture="agent-tavern", context_mode="dsh-native", **binding
        )
        event = SessionCreated(
            id=new_id(), session_id=session_id, ts=datetime.now(UTC), payload=payload
        )
        await SessionLogWriter(self.bus.nc).append(session_id, [event], expected_last=0)

    async def append(self, session_id: str, *events: SessionEvent) -> None:
        writer = SessionLogWriter(self.bus.nc)
        head = await writer.head(session_id)
        await writer.append(session_id, list(events), expected_last=head.log_seq)

    async def chat_row(self, session_id: str) -> Any:
        async with self.pool.acquire() as conn:
            return await conn.fetchrow(
                "SELECT * FROM projector.chats WHERE session_id = $1", session_id
            )

    def chat_file(self, key: str) -> Path:
        return ChatFiles(self.chats).path(key)

    async def stream_last_seq(self) -> int:
        return int((await self.bus.js.stream_info(SESSIONS.name)).state.last_seq)


def settings_for(
    nats_url: str, database_url: str, data_dir: Path, **extra: Any
) -> ProjectorSettings:
    return ProjectorSettings(
        nats_url=nats_url,
        database_url=database_url,
        data_dir=data_dir,
        health_port=0,
        shutdown_grace_s=3,
        log_format="console",
        log_level="WARNING",
        **extra,
    )


@contextlib.asynccontextmanager
async def stopped_projector(
    nats_url: str, database_url: str, data_dir: Path, **extra: Any
) -> AsyncIterator[Projector]:
    """Servers provisioned, the projector built but not started (the test starts it)."""
    async with provisioned_bus(nats_url, data_dir / "loop") as bus:
        await provision(bus.js, consumers=catalog.CONSUMERS, buckets=())
        pool = await asyncpg.create_pool(database_url, min_size=1, max_size=4)
        projector = Projector(bus, settings_for(nats_url, database_url, data_dir, **extra), pool)
        try:
            yield projector
        finally:
            await projector.halt()
            await pool.close()


@pytest.fixture
async def idle_projector(
    nats_url: str, database_url: str, tmp_path: Path
) -> AsyncIterator[Projector]:
    async with stopped_projector(nats_url, database_url, tmp_path / "data") as found:
        yield found


@pytest.fixture
async def projector(idle_projector: Projector) -> Projector:
    await idle_projector.start()
    return idle_projector


def msg_id(headers: dict[str, str] | None) -> str | None:
    return (headers or {}).get(Header.MSG_ID.value)
