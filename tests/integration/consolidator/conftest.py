"""The consolidator and the ledger in process against a fresh nats-server and database, a
loopback model, and a handle to publish session events, call RPCs and read both schemas."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import nats
import nats.errors
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext

from tavern_consolidator import app as consolidator_app
from tavern_consolidator.config import ConsolidatorSettings
from tavern_events import subjects
from tavern_events.envelope import SessionEvent
from tavern_events.ids import new_id
from tavern_events.turn import TurnEnded, TurnEndedPayload
from tavern_events.union import encode, subject_for
from tavern_ledger import app as ledger_app
from tavern_llm import LLMConfig
from tavern_runtime.health import health_file
from tavern_runtime.provision import provision
from tavern_runtime.service import serve
from tests.integration.consolidator.model_server import ModelServer
from tests.integration.ledger.conftest import ledger_settings
from tests.integration.services.conftest import running_service
from tests.support import eventually, signed_nats
from tests.unit.ledger.builders import session_created, user_message

FAST = {
    "consolidator_consumer_wait_s": 0.05,
    "consolidator_poll_s": 0.2,
    "consolidator_retry_base_s": 0.2,
    "consolidator_retry_max_s": 1.0,
    "consolidator_timeout_s": 10.0,
    "consolidator_judge_claims": False,  # on where a test judges claims (its own requests)
}


def consolidator_settings(
    data_dir: Path, nats_url: str, database_url: str, **extra: Any
) -> ConsolidatorSettings:
    return ConsolidatorSettings(
        nats_url=nats_url,
        database_url=database_url,
        data_dir=data_dir,
        health_port=0,
        shutdown_grace_s=4,
        log_format="console",
        log_level="WARNING",
        **{**FAST, **extra},
    )


def model_config(base_url: str | None) -> LLMConfig:
    """A model at `base_url`, or (None) no model at all: the offline stand-in only."""
    if base_url is None:
        return LLMConfig(base_url="", max_retries=0)
    return LLMConfig(base_url=base_url, api_key="test", model="distil-test", max_retries=0)


@contextlib.asynccontextmanager
async def running_consolidator(
    settings: ConsolidatorSettings, llm: LLMConfig
) -> AsyncIterator[asyncio.Task[int]]:
    """The consolidator's app served as `python -m tavern_consolidator` would, minus signals."""
    app = consolidator_app.build_app(settings, llm)
    stop = asyncio.Event()
    task = asyncio.create_task(serve("consolidator", app, settings, stop=stop))
    record = health_file(settings.data_dir, "consolidator")
    try:
        await eventually(record.exists, timeout=15)
        yield task
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.shield(task), 30)


@dataclass
class Tavern:
    """Both services' client: the bus, RPCs, and read-only looks at the two schemas."""

    nc: Client
    js: JetStreamContext
    db: Any
    model: ModelServer
    seqs: dict[str, int] = field(default_factory=dict)
    t0: datetime = field(default_factory=lambda: datetime.now(UTC) - timedelta(hours=1))
    """When the test's conversation starts: an hour ago, so the events' own times fall inside
    the windows the consolidator judges by them (the rules channel's seven days)."""

    def at(self, seq: int, day: int = 0) -> datetime:
        """The time of event `seq`, `day` days after the conversation's start."""
        return self.t0 + timedelta(days=day, seconds=seq)

    async def publish(self, event: SessionEvent) -> int:
        ack = await self.js.publish(subject_for(event), encode(event))
        return int(ack.seq)

    def _seq(self, session_id: str) -> int:
        self.seqs[session_id] = self.seqs.get(session_id, 0) + 1
        return self.seqs[session_id]

    async def session(self, session_id: str, chat_id: str | None = None) -> None:
        self.seqs[session_id] = 1
        await self.publish(session_created(session_id, chat_id=chat_id))

    async def say(self, session_id: str, *texts: str, day: int = 0) -> None:
        """User messages (each becomes evidence), `day` days after the conversation's start."""
        for text in texts:
            seq = self._seq(session_id)
            ts = self.at(seq, day)
            await self.publish(user_message(session_id, seq, text, ts=ts))

    async def end_turn(self, session_id: str, turn: int) -> None:
        seq = self._seq(session_id)
        event = TurnEnded(
            id=new_id(),
            session_id=session_id,
            seq=seq,
            ts=self.at(seq),
            turn=turn,
            payload=TurnEndedPayload(outcome="completed", steps=1),
        )
        await self.publish(event)

    async def rpc(self, service: str, op: str, /, **body: Any) -> dict[str, Any]:
        data = json.dumps(body, default=str).encode()
        msg = await self.nc.request(subjects.rpc(service, op), data, timeout=15)
        found: dict[str, Any] = json.loads(msg.data)
        return found

    async def copies(self, scope_id: str) -> int:
        """Evidence copies the consolidator holds for a scope."""
        return int(
            await self.db.fetchval(
                "SELECT count(*) FROM consolidator.evidence WHERE scope_id = $1", scope_id
            )
        )

    async def batches(self, scope_id: str) -> list[dict[str, Any]]:
        rows = await self.db.fetch(
            "SELECT * FROM consolidator.batch WHERE scope_id = $1 ORDER BY id", scope_id
        )
        return [dict(r) for r in rows]

    async def observations(
        self, scope_id: str, state: str | None = "active"
    ) -> list[dict[str, Any]]:
        rows = await self.db.fetch(
            "SELECT * FROM ledger.observation WHERE scope_id = $1 "
            "AND ($2::text IS NULL OR state = $2) ORDER BY created_at, id",
            scope_id,
            state,
        )
        return [dict(r) for r in rows]

    async def watermark(self, scope_id: str) -> tuple[Any, str] | None:
        row = await self.db.fetchrow(
            "SELECT watermark_at, watermark_id FROM consolidator.scope_state WHERE scope_id = $1",
            scope_id,
        )
        return (row["watermark_at"], row["watermark_id"]) if row else None

    async def settled(self, timeout: float = 15) -> None:
        """Both of the consolidator's consumers have nothing pending or unacknowledged."""

        async def check() -> bool:
            for stream, durable in (
                ("LEDGER", "consolidator-ledger"),
                ("SESSIONS", "consolidator-sessions"),
            ):
                info = await self.js.consumer_info(stream, durable)
                if info.num_pending or info.num_ack_pending:
                    return False
            return True

        await eventually(check, timeout=timeout)

    async def ok_batches(
        self, scope_id: str, count: int = 1, timeout: float = 20
    ) -> list[dict[str, Any]]:
        async def check() -> list[dict[str, Any]]:
            found = [b for b in await self.batches(scope_id) if b["status"] == "ok"]
            return found if len(found) >= count else []

        return await eventually(check, timeout=timeout)


async def provisioned(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        consumers = (*ledger_app.CONSUMERS, *consolidator_app.CONSUMERS)
        await provision(nc.jetstream(), consumers=consumers)
    finally:
        await nc.close()


@pytest.fixture
def consolidator_options() -> dict[str, Any]:
    """Override in a test module to run the consolidator with other settings."""
    return {}


@pytest.fixture
def model_url() -> str | None:
    """ "model" = the loopback server; override with None for "no model configured"."""
    return "model"


@pytest.fixture
async def model_server() -> AsyncIterator[ModelServer]:
    async with ModelServer() as server:
        yield server


@pytest.fixture
async def tavern(
    tmp_path: Path,
    nats_url: str,
    database_url: str,
    model_server: ModelServer,
    model_url: str | None,
    consolidator_options: dict[str, Any],
) -> AsyncIterator[Tavern]:
    await provisioned(nats_url)
    base = model_server.base_url if model_url == "model" else model_url
    ledger = ledger_settings(
        tmp_path / "ledger",
        nats_url,
        database_url,
        ledger_rpc_rate_per_s=1000.0,
        ledger_rpc_burst=1000,
    )
    settings = consolidator_settings(
        tmp_path / "consolidator", nats_url, database_url, **consolidator_options
    )
    async with (
        running_service("ledger", ledger),
        running_consolidator(settings, model_config(base)),
    ):
        nc = await signed_nats(nats_url)  # asks as the operator, as the CLI does
        db = await asyncpg.connect(database_url)
        try:
            await eventually(lambda: _answers(nc), timeout=15)
            yield Tavern(nc, nc.jetstream(), db, model_server)
        finally:
            await db.close()
            await nc.close()


async def _answers(nc: Client) -> bool:
    for service in ("ledger", "consolidator"):
        try:
            reply = await nc.request(subjects.rpc(service, "ping"), b"", timeout=2)
        except nats.errors.Error:
            return False
        if not json.loads(reply.data).get("ok"):
            return False
    return True


async def tavern_cli(tavern: Tavern, *argv: str) -> tuple[int, str]:
    """`tavern dream ...` / `tavern rules ...` against the running consolidator."""
    from tavern_cli.commands import dream, rules
    from tavern_cli.main import build_parser

    args, _ = build_parser().parse_known_args(list(argv))
    command = dream if argv[0] == "dream" else rules
    out = io.StringIO()
    code = await command.perform(dream.ConsolidatorClient(tavern.nc, args.actor), args, out)
    return code, out.getvalue()
