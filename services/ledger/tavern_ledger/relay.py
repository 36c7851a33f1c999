"""The outbox relay: publishes committed LEDGER facts in commit order, then forgets them.

Each fact's `Nats-Msg-Id` is its derived id, so a fact published twice (a crash between the
stream's ack and the delete, two replicas) is stored once. A failed publish leaves the facts
for the next flush: ingestion and RPCs never wait on the LEDGER stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js.api import Header

from tavern_events.streams import LEDGER
from tavern_ledger import outbox
from tavern_ledger.errors import translated
from tavern_runtime.errors import TavernError, TransientError
from tavern_runtime.logs import get_logger
from tavern_runtime.pg import Pool

log = get_logger(__name__)

PAGE = 256
PUBLISH_TIMEOUT_S = 5.0


class Relay:
    def __init__(self, pool: Callable[[], Pool], nc: Callable[[], Client]) -> None:
        self._pool, self._nc = pool, nc
        self._lock = asyncio.Lock()
        self._again = False
        self._behind: asyncio.Task[None] | None = None

    def kick(self) -> None:
        """Flush in the background (ingestion goes on meanwhile); a kick while that flush runs
        makes it go round once more, so facts committed during a flush are not left behind."""
        self._again = True
        if self._behind is None or self._behind.done():
            self._behind = asyncio.create_task(self._flush_while_kicked(), name="ledger-relay")

    async def idle(self) -> None:
        """Wait for the background flush (before the connection closes)."""
        if self._behind is not None:
            await asyncio.shield(self._behind)

    async def _flush_while_kicked(self) -> None:
        while self._again:
            self._again = False
            try:
                await self.flush()
            except Exception as exc:  # a bug: the facts stay in the outbox for the next flush
                log.error("ledger_relay_failed", error=repr(exc))

    async def flush(self) -> int:
        """Publish every pending fact; returns how many were published (0 on failure). A short
        page was the last: a fact committed after its claim comes with a kick of its own, so
        reading one more (empty) page would cost a transaction and find nothing."""
        published = 0
        async with self._lock:
            try:
                while True:
                    count = await self._page()
                    published += count
                    if count < PAGE:
                        break
            except (NatsError, TimeoutError, TavernError) as exc:
                log.warning("ledger_facts_deferred", error=repr(exc), published=published)
        return published

    async def _page(self) -> int:
        with translated():
            async with self._pool().acquire() as conn, conn.transaction():
                pending = await outbox.take(conn, PAGE)
                if not pending:
                    return 0
                await self._publish(pending)  # before the delete commits
        return len(pending)

    async def _publish(self, pending: list[outbox.Pending]) -> None:
        """One window: every fact goes out with a reply subject of its own, then all their
        acknowledgements are awaited (a stored duplicate is acknowledged too). Leaner than
        nats-py's `publish_async`, which spends a future, a semaphore and random bytes on each."""
        nc = self._nc()
        inbox = nc.new_inbox()
        acks = _Acks(len(pending))
        sub = await nc.subscribe(f"{inbox}.*", cb=acks.arrived)
        try:
            for index, p in enumerate(pending):
                headers = {Header.MSG_ID.value: p.msg_id, _EXPECTED_STREAM: LEDGER.name}
                await nc.publish(p.subject, p.body, reply=f"{inbox}.{index}", headers=headers)
            await asyncio.wait_for(acks.done.wait(), PUBLISH_TIMEOUT_S)
        finally:
            await sub.unsubscribe()
        if acks.refused is not None:
            raise TransientError(f"LEDGER refused a fact: {acks.refused}")


_EXPECTED_STREAM = Header.EXPECTED_STREAM.value


class _Acks:
    """The acknowledgements of one publish window: `<inbox>.<index>` answers fact `index`."""

    def __init__(self, count: int) -> None:
        self._waiting = set(range(count))
        self.refused: str | None = None
        self.done = asyncio.Event()

    async def arrived(self, msg: Msg) -> None:
        status = msg.headers.get(Header.STATUS.value) if msg.headers else None  # 503: no stream
        if status or (b'"error"' in msg.data and "error" in json.loads(msg.data)):
            self.refused = status or msg.data.decode(errors="replace")
            self.done.set()
            return
        self._waiting.discard(int(msg.subject.rpartition(".")[2]))
        if not self._waiting:
            self.done.set()
