"""The ledger service in process against a fresh nats-server and a fresh database, plus a
handle to publish session events, call its RPCs and look at its tables."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import nats
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext

from tavern_events import subjects
from tavern_events.envelope import SessionEvent
from tavern_events.union import encode, subject_for
from tavern_ledger import app as ledger_app
from tavern_ledger.config import LedgerSettings
from tavern_runtime.provision import provision
from tests.integration.services.conftest import running_service
from tests.support import auth, eventually, signed_nats


@dataclass
class LedgerBus:
    """A client of the running ledger: the bus, its RPCs and (read-only) its database."""

    nc: Client
    js: JetStreamContext
    db: Any

    async def publish(self, event: SessionEvent, msg_id: str | None = None) -> int:
        """Store `event` on SESSIONS (a distinct msg id stores a redelivered copy)."""
        headers = {"Nats-Msg-Id": msg_id} if msg_id else None
        ack = await self.js.publish(subject_for(event), encode(event), headers=headers)
        return ack.seq

    async def publish_raw(self, subject: str, data: bytes) -> int:
        return (await self.js.publish(subject, data)).seq

    async def rpc(
        self, name: str, /, *, headers: Mapping[str, str] | None = None, **body: Any
    ) -> dict[str, Any]:
        """Call `tavern.rpc.ledger.<name>` as the operator, unless `headers` say who else."""
        reply = await self.nc.request(
            subjects.rpc("ledger", name),
            json.dumps(body, default=str).encode(),
            timeout=10,
            headers=auth() if headers is None else dict(headers),
        )
        found: dict[str, Any] = json.loads(reply.data)
        return found

    async def rpc_raw(self, op: str, data: bytes) -> dict[str, Any]:
        reply = await self.nc.request(subjects.rpc("ledger", op), data, timeout=10, headers=auth())
        found: dict[str, Any] = json.loads(reply.data)
        return found

    async def evidence(self, *, claims: bool = False, **where: Any) -> list[dict[str, Any]]:
        """Rows matching `where`: people's messages kept whole and other evidence, or with
        `claims` only the claims cut from messages (in order)."""
        clauses = [f"{k} = ${i}" for i, k in enumerate(where, start=1)]
        clauses.append("claim_of IS NOT NULL" if claims else "claim_of IS NULL")
        rows = await self.db.fetch(
            f"SELECT * FROM ledger.evidence WHERE {' AND '.join(clauses)} "
            "ORDER BY observed_at, (metadata -> 'claim' ->> 'n')::int NULLS FIRST",
            *where.values(),
        )
        return [dict(r) for r in rows]

    async def ingested_through(self, stream_seq: int, timeout: float = 10) -> None:
        """Wait until the ingest checkpoint reached `stream_seq`."""

        async def check() -> bool:
            found = await self.db.fetchval(
                "SELECT stream_seq FROM ledger.ingest_checkpoint WHERE consumer = 'ledger-ingest'"
            )
            return bool(found and found >= stream_seq)

        await eventually(check, timeout=timeout)

    async def settled(self, timeout: float = 10) -> None:
        """Every delivered message was acknowledged (or terminated)."""

        async def check() -> bool:
            info = await self.js.consumer_info("SESSIONS", "ledger-ingest")
            return bool(info.num_pending == 0 and info.num_ack_pending == 0)

        await eventually(check, timeout=timeout)


async def _provisioned(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        await provision(nc.jetstream(), consumers=ledger_app.CONSUMERS)
    finally:
        await nc.close()


def ledger_settings(
    tmp_path: Path, nats_url: str, database_url: str, **extra: Any
) -> LedgerSettings:
    return LedgerSettings(
        nats_url=nats_url,
        database_url=database_url,
        data_dir=tmp_path,
        health_port=0,
        shutdown_grace_s=5,
        log_format="console",
        log_level="WARNING",
        ledger_ingest_wait_s=0.05,
        **extra,
    )


@pytest.fixture
def ledger_options() -> dict[str, Any]:
    """Override in a test module to run the service with other `ledger_*` settings."""
    return {}


@pytest.fixture
async def ledger(
    tmp_path: Path, nats_url: str, database_url: str, ledger_options: dict[str, Any]
) -> AsyncIterator[LedgerBus]:
    await _provisioned(nats_url)
    settings = ledger_settings(tmp_path, nats_url, database_url, **ledger_options)
    async with running_service("ledger", settings):
        nc = await signed_nats(nats_url)
        db = await asyncpg.connect(database_url)
        try:
            await eventually(lambda: _answers(nc), timeout=10)
            yield LedgerBus(nc, nc.jetstream(), db)
        finally:
            await db.close()
            await nc.close()


async def _answers(nc: Client) -> bool:
    reply = await nc.request(subjects.rpc("ledger", "ping"), b"", timeout=2)
    return bool(json.loads(reply.data).get("ok"))
