"""Raw pull requests of a durable consumer against a real JetStream: what a gathering reader
(the projector's pull loop) relies on. `first` answers as soon as one message arrives, even
while a long request is open; `expect` keeps messages coming for a window; `close` hands back
what was delivered and not taken."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client
from nats.js import JetStreamContext

from tavern_runtime.provision import ConsumerSpec
from tavern_runtime.pull import Pull

pytestmark = pytest.mark.integration

STREAM = "PULL_TEST"
SPEC = ConsumerSpec(
    name="puller", stream=STREAM, filter_subjects=("pt.>",), max_deliver=5, ack_wait_s=30.0
)


@pytest.fixture
async def bus(nats_url: str) -> AsyncIterator[tuple[Client, JetStreamContext]]:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await js.add_stream(name=STREAM, subjects=["pt.>"])
    await js.add_consumer(STREAM, SPEC.config())
    try:
        yield nc, js
    finally:
        await js.delete_stream(STREAM)
        await nc.close()


async def publish(js: JetStreamContext, numbers: range) -> None:
    for n in numbers:
        await js.publish(f"pt.{n}", str(n).encode())


async def test_first_takes_a_backlog_up_to_the_batch_at_once(
    bus: tuple[Client, JetStreamContext],
) -> None:
    nc, js = bus
    await publish(js, range(10))
    pull = Pull(nc, STREAM, SPEC.name)
    await pull.open()
    got = await pull.first(4, wait=5.0)
    assert [int(m.data) for m in got] == [0, 1, 2, 3]
    assert [int(m.data) for m in await pull.first(4, wait=5.0)] == [4, 5, 6, 7]
    assert await pull.close(1.0) == []  # asked for no more than it took


async def test_first_answers_with_the_first_arrival_while_a_long_request_is_open(
    bus: tuple[Client, JetStreamContext],
) -> None:
    nc, js = bus
    pull = Pull(nc, STREAM, SPEC.name)
    await pull.open()
    assert await pull.first(8, wait=0.2) == []  # nothing stored: the request expires empty
    waiting = asyncio.ensure_future(pull.first(8, wait=10.0))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    await publish(js, range(1))
    got = await asyncio.wait_for(waiting, 5)
    assert [int(m.data) for m in got] == [0]
    assert time.monotonic() - started < 1.0  # not held back to fill the batch of eight
    await publish(js, range(1, 3))  # the long request stays open and delivers these
    await asyncio.sleep(0.2)
    assert [int(m.data) for m in await pull.first(8, wait=10.0)] == [1, 2]
    for msg in got:
        await msg.ack()
    await pull.close(0.1)


async def test_expect_delivers_what_arrives_within_the_window(
    bus: tuple[Client, JetStreamContext],
) -> None:
    nc, js = bus
    await publish(js, range(1))
    pull = Pull(nc, STREAM, SPEC.name)
    await pull.open()
    got = await pull.first(16, wait=1.0)  # a no-wait request: it is answered and done
    assert [int(m.data) for m in got] == [0]
    await pull.expect(16 - len(got), 0.5)
    await publish(js, range(1, 4))
    await asyncio.sleep(0.2)
    assert [int(m.data) for m in pull.in_hand(16)] == [1, 2, 3]
    assert pull.in_hand(16) == []
    await pull.close(1.0)


async def test_close_waits_out_the_open_request_so_nothing_lands_on_a_dead_inbox(
    bus: tuple[Client, JetStreamContext],
) -> None:
    nc, js = bus
    pull = Pull(nc, STREAM, SPEC.name)
    await pull.open()
    await pull.expect(8, 0.5)
    closing = asyncio.ensure_future(pull.close(2.0))
    await asyncio.sleep(0.1)
    await publish(js, range(2))  # delivered to the open request before it expires
    left = await asyncio.wait_for(closing, 5)
    assert [int(m.data) for m in left] == [0, 1]
    info = await js.consumer_info(STREAM, SPEC.name)
    assert info.num_ack_pending == 2  # handed to the caller, who naks or acks them
