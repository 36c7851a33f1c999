"""Pull requests of one durable consumer answered on an inbox of its own (raw nats-py), shared by
the ordered batch readers of the services (`tavern_runtime.batchconsumer`, the projector's
pull loop).

Why not nats-py's `PullSubscription.fetch`: it spends a task, a timer and a uuid on every
message. Fetching and acking a message cost a client about 22-25 us that way and 5 us through
a callback that collects what a request delivers (20,000 stored messages, batches of 256, this
machine), and the projector takes about 29 deliveries a turn.
"""

from __future__ import annotations

import asyncio
import contextlib

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError
from nats.js import api

ANSWER_GRACE_S = 1.0
"""How much longer than its expiry a pull request may take to be answered before it counts
as lost (a reconnect drops requests in flight)."""

_DONE = frozenset({"404", "408"})
"""Statuses that end a pull request normally: no messages (now), request expired."""


class PullRefused(NatsError):
    """JetStream answered a pull request with an error status (no stream, consumer deleted)."""


class Pull:
    """Pull requests of one durable, answered on an inbox of its own, whose callback collects
    the messages in arrival (stream) order. One request is open at a time; what it delivers
    beyond the batch in hand waits for the next `take` (or `first`, `in_hand`).

    `take` fills batches (it waits for a batch's worth while a request is open); `first` and
    `expect` serve a reader that gathers for a window of its own and must not wait longer."""

    def __init__(self, nc: Client, stream: str, durable: str) -> None:
        self._nc = nc
        self._next = f"{api.DEFAULT_PREFIX}.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._sub: Subscription | None = None
        self._inbox = ""
        self._got: list[Msg] = []
        self._owed = 0
        """Messages the open request may still deliver (0: no request is open)."""
        self._want = 0
        self._answered = asyncio.Event()
        self._refused: str | None = None
        self._expiring = False
        """Whether the open request waits for messages (else it answers what is there now)."""

    async def open(self) -> None:
        self._inbox = self._nc.new_inbox()
        self._sub = await self._nc.subscribe(self._inbox, cb=self._arrived)

    async def take(self, most: int, wait: float) -> list[Msg]:
        """Up to `most` messages: those available now, else the first to arrive within `wait`."""
        if len(self._got) < most:
            if not self._owed:
                await self._request(most - len(self._got))
            await self._answer(most, ANSWER_GRACE_S)
        await self._arrival(most, wait)
        taken = self.in_hand(most)
        if taken and not self._owed and len(self._got) < most:
            await self._request(most - len(self._got))  # arrives while this batch is handled
        return taken

    def in_hand(self, most: int) -> list[Msg]:
        """Up to `most` of the messages delivered already, without asking or waiting."""
        taken, self._got = self._got[:most], self._got[most:]
        return taken

    async def first(self, most: int, wait: float) -> list[Msg]:
        """What is in hand (up to `most`); else what is available now; else the first message
        to arrive within `wait`, as soon as it does (empty when none came)."""
        if not self._got and not self._owed:
            await self._request(most)
            await self._answer(most, ANSWER_GRACE_S)
        await self._arrival(most, wait)
        return self.in_hand(most)

    async def _arrival(self, most: int, wait: float) -> None:
        """With nothing in hand, wait up to `wait` for the first message (asking for up to
        `most` if no request is open); raise if the request was refused."""
        if not self._got:
            if not self._owed:
                await self._request(most, expires=wait)
            await self._answer(1, wait + ANSWER_GRACE_S)
        if not self._got and self._refused:
            raise PullRefused(self._refused)

    async def expect(self, most: int, expires: float) -> None:
        """Keep a request open that delivers up to `most` messages in all (those in hand
        included) as they arrive, for `expires` seconds if it has to be opened now."""
        if self._owed and not self._expiring:  # a no-wait request ends at once: let it
            await self._answer(len(self._got) + self._owed, ANSWER_GRACE_S)
        if not self._owed and len(self._got) < most:
            await self._request(most - len(self._got), expires=expires)

    async def close(self, wait: float) -> list[Msg]:
        """Stop pulling once the open request is answered (what it delivers after the inbox
        is gone would wait for its ack wait); returns what was fetched but not taken."""
        if self._owed:
            with contextlib.suppress(NatsError):
                await self._answer(len(self._got) + self._owed + 1, wait + ANSWER_GRACE_S)
        if self._sub is not None:
            with contextlib.suppress(NatsError):
                await self._sub.unsubscribe()
            self._sub = None
        left, self._got, self._owed = self._got, [], 0
        return left

    async def _request(self, batch: int, expires: float | None = None) -> None:
        """Ask for `batch` messages: those available (`no_wait`), or, with `expires`, those
        that arrive until then."""
        self._owed, self._refused, self._expiring = batch, None, expires is not None
        body = f'{{"batch":{batch},"no_wait":true}}'
        if expires is not None:
            body = f'{{"batch":{batch},"expires":{int(expires * 1e9)}}}'
        await self._nc.publish(self._next, body.encode(), reply=self._inbox)

    async def _answer(self, want: int, timeout: float) -> None:
        """Wait until `want` messages are in hand or the open request is done."""
        self._want = want
        if self._ready():
            return
        self._answered.clear()
        try:
            await asyncio.wait_for(self._answered.wait(), timeout)
        except TimeoutError:  # never answered (a reconnect lost it): the next take asks anew
            self._owed = 0

    def _ready(self) -> bool:
        return len(self._got) >= self._want or not self._owed

    async def _arrived(self, msg: Msg) -> None:
        status = msg.headers.get(api.Header.STATUS.value) if msg.headers else None
        if status:  # the request is done: 404 nothing (more) now, 408 expired, 409, 503 ...
            self._owed = 0
            self._refused = None if status in _DONE else f"{status} {msg.headers}"
        else:
            self._got.append(msg)
            self._owed = max(0, self._owed - 1)
        if self._ready():
            self._answered.set()
