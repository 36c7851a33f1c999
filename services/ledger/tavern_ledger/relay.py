"""The outbox relay: publishes committed LEDGER facts in commit order, then forgets them.

Each fact's `Nats-Msg-Id` is its derived id, so a fact published twice (a crash between the
stream's ack and the delete, two replicas) is stored once. A failed publish leaves the facts
for the next flush: ingestion and RPCs never wait on the LEDGER stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import Header

from tavern_events.streams import LEDGER
from tavern_ledger.errors import translated
from tavern_ledger.store import outbox
from tavern_runtime.errors import TavernError
from tavern_runtime.logs import get_logger
from tavern_runtime.pg import Pool

log = get_logger(__name__)

PAGE = 256
PUBLISH_TIMEOUT_S = 5.0


class Relay:
    def __init__(self, pool: Callable[[], Pool], js: Callable[[], JetStreamContext]) -> None:
        self._pool, self._js = pool, js
        self._lock = asyncio.Lock()

    async def flush(self) -> int:
        """Publish every pending fact; returns how many were published (0 on failure)."""
        published = 0
        async with self._lock:
            try:
                while count := await self._page():
                    published += count
            except (NatsError, TimeoutError, TavernError) as exc:
                log.warning("ledger_facts_deferred", error=repr(exc), published=published)
        return published

    async def _page(self) -> int:
        with translated():
            async with self._pool().acquire() as conn, conn.transaction():
                pending = await outbox.claim(conn, PAGE)
                if not pending:
                    return 0
                await self._publish(pending)
                await outbox.delete(conn, [p.id for p in pending])
        return len(pending)

    async def _publish(self, pending: list[outbox.Pending]) -> None:
        js = self._js()
        futures = [
            await js.publish_async(
                p.record.subject,
                p.record.body,
                stream=LEDGER.name,
                headers={Header.MSG_ID.value: p.record.msg_id},
            )
            for p in pending
        ]
        await asyncio.wait_for(asyncio.gather(*futures), PUBLISH_TIMEOUT_S)
