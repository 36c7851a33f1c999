"""An ordered batch reader of one durable pull consumer (raw nats-py), shared by the services
that consume streams in order (the ledger's ingestion, the consolidator's intake): take up to
`batch` messages (returning as soon as some are there), hand them over in stream order, ack
them all when the handler returns, nak them all (with a delay) when it raises. The next batch
is requested while the handler works on the current one.

Why not FastStream's batch subscriber: with nats-py 2.16 its fill loop dies on the builtin
`TimeoutError` a nearly spent fetch deadline raises, dropping the messages it had gathered until
their ack wait ends; and it waits for a full batch instead of taking what is available. Why not
nats-py's `PullSubscription.fetch`: see `tavern_runtime.pull`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig
from nats.js.errors import NotFoundError

from tavern_runtime import dlq
from tavern_runtime.logs import get_logger
from tavern_runtime.provision import CONSUMER_FIELDS, ConsumerSpec, compare
from tavern_runtime.pull import Pull

log = get_logger(__name__)

Handler = Callable[[Sequence[Msg]], Awaitable[None]]
RETRY_DELAY_S = 1.0
MAX_RETRY_DELAY_S = 60.0


def retry_delay(deliveries: int, base: float = RETRY_DELAY_S) -> float:
    """Exponential backoff by how often the batch was delivered: 1, 2, 4 ... 60 s."""
    return float(min(MAX_RETRY_DELAY_S, base * 2.0 ** max(0, deliveries - 1)))


class BatchConsumer:
    def __init__(
        self,
        spec: ConsumerSpec,
        handler: Handler,
        *,
        batch: int = 256,
        wait_s: float = 1.0,
        retry_delay_s: float = RETRY_DELAY_S,
        dead_letters_as: str | None = None,
    ) -> None:
        """`dead_letters_as` names the service whose dead letters the messages that exhaust
        their deliveries become (a max-deliveries watcher runs as long as the consumer)."""
        self.spec = spec
        self._durable, self._stream, self._config = spec.name, spec.stream, spec.config()
        self._handler = handler
        self._batch, self._wait, self._retry = batch, wait_s, retry_delay_s
        self._dead_letters_as = dead_letters_as
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    def start(self, nc: Client, js: JetStreamContext) -> None:
        self._stopping.clear()
        self._task = asyncio.create_task(self._run(nc, js), name=f"consumer-{self._durable}")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Finish the batch in hand (within `grace_s`), then stop fetching."""
        self._stopping.set()
        if self._task is None:
            return
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._task), grace_s)
        if not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self, nc: Client, js: JetStreamContext) -> None:
        watcher = await self._watch(nc, js)
        try:
            await self._consume(nc, js)
        finally:
            if watcher is not None:
                with contextlib.suppress(NatsError):
                    await watcher.unsubscribe()

    async def _watch(self, nc: Client, js: JetStreamContext) -> Subscription | None:
        if self._dead_letters_as is None:
            return None
        return await dlq.watch_max_deliveries(
            nc, js, service=self._dead_letters_as, stream=self._stream, consumer=self._durable
        )

    async def _consume(self, nc: Client, js: JetStreamContext) -> None:
        if not await self._bind(js):
            return
        log.info("consumer_started", consumer=self._durable, stream=self._stream)
        pull = Pull(nc, self._stream, self._durable)
        await pull.open()
        try:
            while not self._stopping.is_set():
                msgs = await self._take(pull)
                delay = await self._deliver(msgs) if msgs else None
                if delay is not None:  # what came in meanwhile goes back too, then a pause
                    await self._hand_back(pull, delay)
                    await self._pause(delay)
                    await pull.open()
        finally:
            await self._hand_back(pull, None)

    async def _bind(self, js: JetStreamContext) -> bool:
        """Make sure the durable exists (created from its spec when provisioning has not run
        yet); while the stream is missing, say so and try again."""
        delay = RETRY_DELAY_S
        while not self._stopping.is_set():
            try:
                with contextlib.suppress(NotFoundError):
                    info = await js.consumer_info(self._stream, self._durable)
                    self._check(info.config)
                    return True
                await js.add_consumer(self._stream, config=self._config)
                return True
            except (NatsError, TimeoutError) as exc:
                log.error("consumer_unavailable", consumer=self._durable, error=repr(exc))
            await self._pause(delay)
            delay = min(MAX_RETRY_DELAY_S, delay * 2)
        return False

    def _check(self, live: ConsumerConfig) -> None:
        """The config check of every start: a durable changed behind provisioning's back may
        be passing over what this reader needs. Said loudly; `tavern status` shows it red and
        `tavern init --apply-drift` repairs it (a reader never rewrites its durable)."""
        resource = f"consumer {self._stream}/{self._durable}"
        for drift in compare(resource, CONSUMER_FIELDS, self._config, live):
            log.error(
                "durable_drift",
                consumer=self._durable,
                field=drift.field,
                expected=str(drift.expected),
                actual=str(drift.actual),
                repair="tavern init --apply-drift",
            )

    async def _take(self, pull: Pull) -> list[Msg]:
        try:
            return await pull.take(self._batch, self._wait)
        except NatsError as exc:  # the connection or the stream is away: do not spin
            log.warning("consumer_fetch_failed", consumer=self._durable, error=repr(exc))
            await self._pause(RETRY_DELAY_S)
            return []

    async def _deliver(self, msgs: list[Msg]) -> float | None:
        """Handle one batch: None when it was acked, else the delay of its redelivery."""
        try:
            await self._handler(msgs)
        except Exception as exc:  # redelivered after the delay, up to max_deliver
            delay = retry_delay(msgs[0].metadata.num_delivered, self._retry)
            log.warning(
                "batch_failed",
                consumer=self._durable,
                error=repr(exc),
                count=len(msgs),
                retry_in_s=delay,
            )
            await _settle(msgs, lambda m: m.nak(delay=delay))
            return delay
        await _settle(msgs, lambda m: m.ack())
        return None

    async def _hand_back(self, pull: Pull, delay: float | None) -> None:
        """Stop pulling and nak what was fetched but not handed over: it is redelivered after
        `delay` (at once when None), not once its ack wait runs out."""
        left = await pull.close(self._wait)
        await _settle(left, lambda m: m.nak(delay=delay))

    async def _pause(self, delay: float) -> None:
        # While Postgres is away, fetching more would only spend deliveries.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), delay)


async def _settle(msgs: Sequence[Msg], settle: Callable[[Msg], Awaitable[None]]) -> None:
    for msg in msgs:
        if not msg._ackd:  # dead-lettered messages were terminated already
            with contextlib.suppress(NatsError):
                await settle(msg)
