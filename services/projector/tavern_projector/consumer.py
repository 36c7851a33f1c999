"""The ordered pull loop of one projection's durable consumer (raw nats-py pull requests,
`tavern_runtime.pull`).

FastStream's batch pull subscriber (0.7.8) keeps fetching until a batch is full; nats-py
2.16 can then raise a bare `asyncio.TimeoutError` that FastStream does not catch, its loop
restarts, and the messages already fetched stay unacknowledged until `ack_wait` (out of
order, and late). This loop
long-polls for the first message, then gathers: it takes what is ready, and unless the batch
is full, waits out a window and takes what arrived meanwhile. A turn's events, published over
a few milliseconds, then land in one batch, and each session's rows and chat file are written
once rather than once per event or two; under a backlog the first pull fills the batch and
nothing waits. It hands the batch to the runner, and acks, naks or heartbeats it itself.

The window follows the traffic. While a batch carries the events of fewer than `BUSY_KEYS`
sessions (a person chatting, a test, a replay of one chat) it is short (`gather_s`, 10 ms),
so a read model follows a finished turn at once. Once a batch carries `BUSY_KEYS` sessions or
more, many sessions are live together and the read models lag behind their turns anyway; the
window grows to `busy_gather_s` (100 ms), and one batch then holds several turns of many
sessions: each projection's checkpoint, rows and fetches are paid per batch, not per turn. It
shrinks back with the first batch of fewer sessions.

Acks stay one per message: the provisioned consumers acknowledge explicitly (an ack covers its
own message only), and changing their policy would mean recreating them on existing installs.
Nor would it pay: an ack costs nats-server about 2.5 us (20,000 messages acked one by one or
once per batch of 256 under `AckPolicy.ALL`, this machine), some 0.08 ms of a turn's ~30.

The requests are raw (`tavern_runtime.pull`): nats-py's `fetch` cost the projector about 20 us
more a message, and it takes about 29 deliveries a turn.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

import nats.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from tavern_projector.runner import LiveRunner, RetryBatch
from tavern_runtime.logs import get_logger
from tavern_runtime.provision import ConsumerSpec
from tavern_runtime.pull import Pull, PullRefused

log = get_logger(__name__)

LONG_POLL_S = 2.0
HEARTBEAT_S = 10.0
RECONNECT_PAUSE_S = 1.0
BIND_RETRY_S = 2.0
BUSY_KEYS = 3
"""From how many sessions (or users, on LEDGER) in one batch the stream counts as busy."""


def window(subjects: Sequence[str], gather_s: float, busy_gather_s: float) -> float:
    """The next batch's gathering window after a batch of messages on `subjects`."""
    keys = {_key(subject) for subject in subjects}
    return busy_gather_s if len(keys) >= BUSY_KEYS else gather_s


def _key(subject: str) -> str:
    """The session of `tavern.session.<id>.…`, the user of `tavern.ledger.<user>.…`."""
    parts = subject.split(".", 3)
    return parts[2] if len(parts) > 2 else subject


class PullLoop:
    def __init__(
        self,
        runner: LiveRunner,
        spec: ConsumerSpec,
        js: Callable[[], JetStreamContext | None],
        *,
        batch: int = 256,
        gather_s: float = 0.01,
        busy_gather_s: float | None = None,
    ) -> None:
        self.runner, self.spec, self._js = runner, spec, js
        self.batch, self.gather_s = batch, gather_s
        self.busy_gather_s = gather_s if busy_gather_s is None else max(busy_gather_s, gather_s)
        self.window = gather_s
        """The gathering window of the next batch (see `window`)."""
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._pull: Pull | None = None
        self._handling = False

    async def start(self) -> None:
        """Start pulling in the background (binding waits for the stream to be provisioned)."""
        self._stopping.clear()
        self._task = asyncio.create_task(self._run(), name=f"pull-{self.spec.name}")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Finish the batch in hand (or leave it unacknowledged for redelivery), then stop;
        what was fetched and not handed over goes back at once."""
        self._stopping.set()
        if self._task is not None:
            if self._handling:  # a waiting pull is cancelled at once; a batch may finish
                with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self._task), grace_s)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                if self._pull is None:
                    await self._bind()
                    continue
                msgs = await self._next_batch(self._pull)
                if msgs:
                    await self._handle(msgs)
                    self.window = window(
                        [m.subject for m in msgs], self.gather_s, self.busy_gather_s
                    )
                self._handling = False
        finally:
            await self._release()

    async def _bind(self) -> None:
        """Bind to the durable; while the stream (or NATS) is missing, retry and say so."""
        js = self._js()
        try:
            if js is None:
                raise RuntimeError("the broker is not connected")
            await _ensure(js, self.spec)
            pull = Pull(js._nc, self.spec.stream, self.spec.name)
            await pull.open()
            self._pull = pull
        except Exception as exc:  # readiness reports the missing stream meanwhile
            log.warning("consumer_unbound", consumer=self.spec.name, error=repr(exc))
            await self._pause(BIND_RETRY_S)

    async def _release(self) -> None:
        """Stop pulling; what was fetched but not handed over is redelivered at once."""
        pull, self._pull = self._pull, None
        if pull is not None:
            await _each(await pull.close(LONG_POLL_S), lambda m: m.nak())

    async def _next_batch(self, pull: Pull) -> list[Msg]:
        """The first message (long poll), then up to `batch` in all: what is in hand at once
        and, if that does not fill the batch, what arrived within `self.window` of the first.
        Holding messages counts as handling them: a stop lets the batch finish."""
        try:
            msgs = await pull.first(self.batch, LONG_POLL_S)
        except PullRefused as exc:  # the consumer is gone (deleted, recreated): bind again
            log.warning("fetch_refused", consumer=self.spec.name, error=str(exc))
            await self._release()
            return []
        except nats.errors.Error as exc:  # the connection is away: do not spin
            log.warning("fetch_failed", consumer=self.spec.name, error=repr(exc))
            await self._pause(RECONNECT_PAUSE_S)
            return []
        if not msgs:
            return []
        self._handling = True
        clock = asyncio.get_running_loop().time
        deadline = clock() + self.window
        while len(msgs) < self.batch and not self._stopping.is_set():
            left = deadline - clock()
            if left <= 0:
                break
            with contextlib.suppress(nats.errors.Error):  # what is in hand is enough then
                await pull.expect(self.batch - len(msgs), left)
            await self._pause(left)  # the window passes (or a stop cuts it)
            msgs += pull.in_hand(self.batch - len(msgs))
        return msgs

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _handle(self, msgs: Sequence[Msg]) -> None:
        self._handling = True
        beat = asyncio.create_task(_heartbeat(msgs))
        try:
            await self.runner.handle(msgs)
        except RetryBatch as retry:
            delay = retry.delay
            await _each(msgs, lambda m: m.nak(delay=delay))
            return
        except Exception as exc:  # never lose the loop: the batch comes back after ack_wait
            log.exception("batch_crashed", consumer=self.spec.name, error=repr(exc))
            return
        finally:
            beat.cancel()
        await _each(msgs, lambda m: m.ack())


async def _ensure(js: JetStreamContext, spec: ConsumerSpec) -> None:
    """Make sure the provisioned durable exists; create it as provisioning would if not."""
    try:
        await js.consumer_info(spec.stream, spec.name)
    except NotFoundError:
        log.warning("consumer_created", consumer=spec.name, stream=spec.stream)
        await js.add_consumer(spec.stream, spec.config())


async def _heartbeat(msgs: Sequence[Msg]) -> None:
    """Tell the server a long batch is still being worked on (no concurrent redelivery)."""
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        await _each(msgs, lambda m: m.in_progress())


async def _each(msgs: Sequence[Msg], act: Callable[[Msg], object]) -> None:
    for msg in msgs:
        with contextlib.suppress(nats.errors.Error):
            await act(msg)  # type: ignore[misc]
