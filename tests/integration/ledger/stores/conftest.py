"""A running ledger app (real NATS and Postgres, in process) and helpers to talk to it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext

from tavern_events import subjects
from tavern_events.ids import new_id
from tavern_events.session import SessionCreated
from tavern_events.turn import TurnEnded
from tavern_events.union import encode, msg_id_for, subject_for
from tavern_ledger.app import CONSUMERS, build_app
from tavern_ledger.config import LedgerSettings
from tavern_runtime.provision import provision
from tests.support import auth, eventually, signed_nats


@dataclass
class Ledger:
    """A started ledger and a client connection to its bus and database."""

    nc: Client
    js: JetStreamContext
    db: Any  # asyncpg.Connection
    seqs: dict[str, int]

    async def call(
        self,
        op: str,
        payload: dict[str, Any],
        timeout: float = 5.0,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """Call a store RPC as the operator, unless `headers` say who else."""
        reply = await self.nc.request(
            subjects.rpc("ledger", op),
            json.dumps(payload).encode(),
            timeout=timeout,
            headers=auth() if headers is None else headers,
        )
        return json.loads(reply.data)

    async def append(self, event: Any) -> None:
        await self.js.publish(
            subject_for(event), encode(event), headers={"Nats-Msg-Id": msg_id_for(event)}
        )

    def next_seq(self, session_id: str) -> int:
        self.seqs[session_id] = self.seqs.get(session_id, 0) + 1
        return self.seqs[session_id]

    async def open_session(
        self, session_id: str, chat_id: str, character_id: str | None = "char_a"
    ) -> None:
        """Append `session/created` and wait until the ledger has the binding."""
        await self.append(created(session_id, chat_id, character_id, self.next_seq(session_id)))
        await eventually(lambda: self.binding(session_id), timeout=10)

    async def end_turn(self, session_id: str, turn: int) -> None:
        event = TurnEnded.model_validate(
            {
                "id": new_id(),
                "session_id": session_id,
                "seq": self.next_seq(session_id),
                "ts": datetime.now(UTC),
                "turn": turn,
                "payload": {"outcome": "completed", "steps": 1},
            }
        )
        await self.append(event)

    async def binding(self, session_id: str) -> dict[str, Any] | None:
        row = await self.db.fetchrow(
            "SELECT * FROM ledger.session_binding WHERE session_id = $1", session_id
        )
        return dict(row) if row is not None else None

    async def audit(self, op: str) -> list[dict[str, Any]]:
        rows = await self.db.fetch(
            "SELECT op, scope_id, actor, reason, target_id, payload FROM ledger.audit "
            "WHERE op = $1 ORDER BY id",
            op,
        )
        return [{**dict(r), "payload": json.loads(r["payload"] or "null")} for r in rows]


def created(
    session_id: str, chat_id: str, character_id: str | None, seq: int = 1, **payload: Any
) -> SessionCreated:
    return SessionCreated.model_validate(
        {
            "id": new_id(),
            "session_id": session_id,
            "seq": seq,
            "ts": datetime.now(UTC),
            "payload": {
                "architecture": "agent-tavern",
                "context_mode": "dsh-native",
                "chat_id": chat_id,
                "character_id": character_id,
                **payload,
            },
        }
    )


def ledger_settings(
    nats_url: str, database_url: str, data_dir: Path, **extra: Any
) -> LedgerSettings:
    return LedgerSettings(
        nats_url=nats_url,
        database_url=database_url,
        data_dir=data_dir,
        shutdown_grace_s=2,
        log_format="console",
        **extra,
    )


async def start_ledger(
    nats_url: str, database_url: str, tmp_path: Path, **extra: Any
) -> AsyncIterator[Ledger]:
    nc = await signed_nats(nats_url)
    js = nc.jetstream(timeout=5)
    await provision(js, consumers=CONSUMERS)
    app = build_app(ledger_settings(nats_url, database_url, tmp_path, **extra))
    async with app.lifespan_context():
        await app.start()
        db = await asyncpg.connect(database_url)
        try:
            yield Ledger(nc, js, db, {})
        finally:
            await db.close()
            await app.stop()
            await nc.drain()


@pytest.fixture
async def ledger(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Ledger]:
    async for running in start_ledger(nats_url, database_url, tmp_path):
        yield running


@pytest.fixture
async def ledger_with_global(
    nats_url: str, database_url: str, tmp_path: Path
) -> AsyncIterator[Ledger]:
    async for running in start_ledger(nats_url, database_url, tmp_path, ledger_global_scope=True):
        yield running
