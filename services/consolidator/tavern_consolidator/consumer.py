"""An ordered batch reader of one durable pull consumer (raw nats-py): fetch what is available
(up to `batch`), hand it over in stream order, ack all when the handler returns, nak all (with a
growing delay) when it raises. The same loop as the ledger's ingestion (FastStream's batch
subscriber drops gathered messages on nats-py's fetch timeout); a shared copy belongs in
`tavern_runtime`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext

from tavern_runtime.logs import get_logger
from tavern_runtime.provision import ConsumerSpec

log = get_logger(__name__)

Handler = Callable[[Sequence[Msg]], Awaitable[None]]
RETRY_DELAY_S = 1.0
MAX_RETRY_DELAY_S = 60.0


def retry_delay(deliveries: int, base: float = RETRY_DELAY_S) -> float:
    """1, 2, 4 ... 60 s by how often the batch was delivered."""
    return float(min(MAX_RETRY_DELAY_S, base * 2.0 ** max(0, deliveries - 1)))


class BatchConsumer:
    def __init__(
        self, spec: ConsumerSpec, handler: Handler, *, batch: int = 256, wait_s: float = 0.5
    ) -> None:
        self.spec, self._handler = spec, handler
        self._batch, self._wait = batch, wait_s
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    def start(self, js: JetStreamContext) -> None:
        self._stopping.clear()
        self._task = asyncio.create_task(self._run(js), name=f"consumer-{self.spec.name}")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Finish the batch in hand (within `grace_s`; unfinished ones are redelivered)."""
        self._stopping.set()
        if self._task is None:
            return
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._task), grace_s)
        if not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self, js: JetStreamContext) -> None:
        sub = await self._bind(js)
        if sub is None:
            return
        log.info("consumer_started", consumer=self.spec.name, stream=self.spec.stream)
        try:
            while not self._stopping.is_set():
                msgs = await self._fetch(sub)
                if msgs:
                    await self._deliver(msgs)
        finally:
            with contextlib.suppress(Exception):  # nats-py never finishes draining a pull sub
                await sub.unsubscribe()

    async def _bind(self, js: JetStreamContext) -> JetStreamContext.PullSubscription | None:
        """Bind to the durable (created from its spec when provisioning has not run yet)."""
        delay = RETRY_DELAY_S
        while not self._stopping.is_set():
            try:
                return await js.pull_subscribe(
                    "", durable=self.spec.name, stream=self.spec.stream, config=self.spec.config()
                )
            except (NatsError, TimeoutError) as exc:
                log.error("consumer_unavailable", consumer=self.spec.name, error=repr(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
            delay = min(MAX_RETRY_DELAY_S, delay * 2)
        return None

    async def _fetch(self, sub: JetStreamContext.PullSubscription) -> list[Msg]:
        try:
            return await sub.fetch(self._batch, timeout=self._wait)
        except (TimeoutError, NatsError):
            return []

    async def _deliver(self, msgs: list[Msg]) -> None:
        try:
            await self._handler(msgs)
        except Exception as exc:  # redelivered after the delay, up to max_deliver
            delay = retry_delay(msgs[0].metadata.num_delivered)
            log.warning("batch_failed", consumer=self.spec.name, error=repr(exc), count=len(msgs))
            await _settle(msgs, lambda m: m.nak(delay=delay))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
            return
        await _settle(msgs, lambda m: m.ack())


async def _settle(msgs: Sequence[Msg], settle: Callable[[Msg], Awaitable[None]]) -> None:
    for msg in msgs:
        if not msg._ackd:  # dead-lettered messages were terminated already
            with contextlib.suppress(NatsError):
                await settle(msg)
