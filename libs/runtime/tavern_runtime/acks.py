"""Awaited JetStream publishes over one reply subscription per connection.

A session log is written one conditional append at a time, each awaited before the next is
sent, so whatever the client spends between an acknowledgement and the next publish is on
the log's critical path. nats-py's `js.publish` spends a NUID, random bytes (a system call),
a `wait_for` and a dataclass parse on each; here a publish costs a counter and a future, and
answers arrive on one wildcard subscription opened on first use. Deadlines share one timer,
set for the earliest of them: an answer usually comes long before, and a timer per publish
(created, pushed on the loop's heap, cancelled) was a few percent of a turn's CPU.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Sequence

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import Header, PubAck
from nats.js.errors import APIError, NoStreamResponseError

NO_RESPONDERS = "503"
WRONG_LAST_SEQUENCE = frozenset({10071, 10164})
"""JetStream's codes for a publish whose expected last sequence did not hold: 10071 names the
sequence found (one replica), 10164 does not (replicated streams and atomic batches)."""


Outgoing = tuple[str, bytes, dict[str, str]]
"""A message to publish: subject, payload, headers."""

FAST_BATCH_FLOW = 100
"""The most messages of one pipelined batch, and the flow-control interval it asks for: a
batch never outruns its flow control, so the stream answers it twice (its start, its end)."""
FAST_START, FAST_APPEND, FAST_COMMIT = 0, 1, 2
"""Fast-ingest operations, carried in the reply subject
`<inbox>.<batch>.<flow>.<gap mode>.<batch seq>.<op>.$FI`."""
FLOW_NOTICE = b'{"type":'
"""How a fast-ingest flow acknowledgement, gap notice or per-message error begins."""


class Acks:
    """Requests whose answers come back on `<inbox>.<n>`, one subscription for all of them."""

    def __init__(self, nc: Client) -> None:
        self._nc = nc
        self._prefix = ""
        self._unique = ""
        """The inbox's own unique part: a pipelined batch's id begins with it (a stream knows
        its batches in flight by id alone, whichever connection sent them)."""
        self._sub: Subscription | None = None
        self._waiting: dict[str, tuple[asyncio.Future[Msg], float]] = {}
        self._tokens = itertools.count(1)
        self._timer: asyncio.TimerHandle | None = None

    @property
    def pending(self) -> int:
        """Publishes still waiting for their answer."""
        return len(self._waiting)

    async def publish(
        self, subject: str, payload: bytes, *, headers: dict[str, str], timeout: float
    ) -> PubAck:
        """Publish to a stream and return its acknowledgement; raises `APIError` (or a
        subclass) when the stream refused the message, `NoStreamResponseError` when no
        stream listens, and `nats.errors.TimeoutError` when no answer came in time."""
        return pub_ack(await self.request(subject, payload, headers=headers, timeout=timeout))

    async def request(
        self, subject: str, payload: bytes, *, headers: dict[str, str], timeout: float
    ) -> Msg:
        """Publish with a reply subject of this connection's and return the answer as is."""
        token, answer = await self._expect(timeout)
        try:
            await self._nc.publish(subject, payload, reply=self._prefix + token, headers=headers)
            return await answer
        finally:
            del self._waiting[token]

    async def pipelined(self, messages: Sequence[Outgoing], *, timeout: float) -> Msg:
        """Publish `messages` as one fast-ingest batch (ADR-50, nats-server 2.14+), each sent
        without waiting for the one before, and return the batch's final answer: its
        acknowledgement (`count` = how many of them the stream holds, in order, from the
        first) or the error that stopped it. The stream stores them in order and stops at
        the first that fails or goes missing: what it holds is always a prefix."""
        if not 1 < len(messages) <= FAST_BATCH_FLOW:
            raise ValueError(f"a pipelined batch has 2 to {FAST_BATCH_FLOW} messages")
        token, answer = await self._expect(timeout, batch=True)
        base = f"{self._prefix}{token}.{FAST_BATCH_FLOW}.fail"
        last = len(messages)
        try:
            for index, (subject, payload, headers) in enumerate(messages, start=1):
                op = FAST_START if index == 1 else FAST_COMMIT if index == last else FAST_APPEND
                reply = f"{base}.{index}.{op}.$FI"
                await self._nc.publish(subject, payload, reply=reply, headers=headers)
            return await answer
        finally:
            del self._waiting[token]

    async def _expect(
        self, timeout: float, *, batch: bool = False
    ) -> tuple[str, asyncio.Future[Msg]]:
        """A new reply token and the answer it will get, failed after `timeout`; the caller
        forgets it (`del self._waiting[token]`) once done. A `batch` token is unique across
        connections: it is the batch's id."""
        if self._sub is None:
            await self._listen()
        token = (self._unique if batch else "") + str(next(self._tokens))
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Msg] = loop.create_future()
        deadline = loop.time() + timeout
        self._waiting[token] = (answer, deadline)
        if self._timer is None or deadline < self._timer.when():
            self._set_timer(loop, deadline)
        return token, answer

    def _set_timer(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(when, self._expire_overdue, loop)

    def _expire_overdue(self, loop: asyncio.AbstractEventLoop) -> None:
        """Fail the requests whose deadline passed; wake again at the earliest one left."""
        self._timer = None
        now, earliest = loop.time(), None
        for answer, deadline in self._waiting.values():
            if deadline <= now:
                if not answer.done():
                    answer.set_exception(nats.errors.TimeoutError())
            elif earliest is None or deadline < earliest:
                earliest = deadline
        if earliest is not None:
            self._set_timer(loop, earliest)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        sub, self._sub = self._sub, None
        if sub is not None:
            await sub.unsubscribe()

    async def _listen(self) -> None:
        prefix = self._nc.new_inbox() + "."
        sub = await self._nc.subscribe(prefix + ">", cb=self._arrived)
        if self._sub is None:
            self._sub, self._prefix = sub, prefix
            self._unique = prefix.rstrip(".").rpartition(".")[2]
        else:  # another request opened one meanwhile
            await sub.unsubscribe()

    async def _arrived(self, msg: Msg) -> None:
        token, _, batch = msg.subject[len(self._prefix) :].partition(".")
        if batch and msg.data.startswith(FLOW_NOTICE):
            return  # a pipelined batch's flow control or gap notice: its final answer follows
        waiting = self._waiting.get(token)
        if waiting is not None and not waiting[0].done():
            waiting[0].set_result(msg)


def raise_refusal(msg: Msg) -> None:
    """Raise what a stream's answer refuses: `NoStreamResponseError` when no stream listens,
    the `APIError` (or subclass) it names; an empty answer (an atomic batch's start) passes."""
    if msg.headers and msg.headers.get(Header.STATUS.value) == NO_RESPONDERS:
        raise NoStreamResponseError
    if msg.data and b'"error"' in msg.data:
        error = json.loads(msg.data).get("error")
        if error:
            APIError.from_error(error)  # raises the error's class


def pub_ack(msg: Msg) -> PubAck:
    """A stream's answer to a publish, as nats-py's `js.publish` reads it."""
    raise_refusal(msg)
    answer = json.loads(msg.data)
    return PubAck(
        stream=answer["stream"],
        seq=answer["seq"],
        domain=answer.get("domain"),
        duplicate=answer.get("duplicate"),
        batch_size=answer.get("count"),
    )
