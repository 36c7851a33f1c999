"""The ordered batch reader (ledger ingestion, consolidator intake) against a real JetStream:
batches in stream order, acked once handled; a failed batch (and what was fetched meanwhile)
comes back; a stop hands back at once what it fetched but did not hand over. Below, the raw
pull requests under it (`tavern_runtime.pull`) as a gathering reader (the projector's pull
loop) uses them: `first` answers as soon as one message arrives, even while a long request is
open; `expect` keeps messages coming for a window; `close` hands back what was delivered and
not taken."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace

import nats
import pytest
import structlog
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from tavern_events.dlq import DeadLetter, decode_dead_letter
from tavern_events.streams import DLQ
from tavern_runtime.batchconsumer import BatchConsumer
from tavern_runtime.provision import ConsumerSpec, provision
from tavern_runtime.pull import Pull
from tests.support import eventually

pytestmark = pytest.mark.integration

STREAM = "CONSUMER_TEST"
SPEC = ConsumerSpec(
    name="reader", stream=STREAM, filter_subjects=("ct.>",), max_deliver=20, ack_wait_s=30.0
)


@dataclass
class Recorder:
    """A handler that records what it was handed, failing the batches it is told to."""

    batches: list[list[int]] = field(default_factory=list)
    fail_first: int = 0
    hold: asyncio.Event | None = None

    async def __call__(self, msgs: Sequence[Msg]) -> None:
        self.batches.append([int(m.data) for m in msgs])
        if self.hold is not None:
            await self.hold.wait()
        if self.fail_first > 0:
            self.fail_first -= 1
            raise RuntimeError("not now")

    def handled(self) -> list[int]:
        return [n for batch in self.batches for n in batch]


@pytest.fixture
async def bus(nats_url: str) -> AsyncIterator[tuple[Client, JetStreamContext]]:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await js.add_stream(name=STREAM, subjects=["ct.>"])
    try:
        yield nc, js
    finally:
        await nc.close()


async def publish(js: JetStreamContext, numbers: range) -> None:
    for n in numbers:
        await js.publish(f"ct.{n % 3}", str(n).encode())


async def settled(js: JetStreamContext) -> bool:
    try:
        info = await js.consumer_info(STREAM, SPEC.name)
    except NotFoundError:  # the reader has not created its durable yet
        return False
    return bool(info.num_pending == 0 and info.num_ack_pending == 0)


async def test_batches_come_in_stream_order_and_are_acked(
    bus: tuple[Client, JetStreamContext],
) -> None:
    nc, js = bus
    await publish(js, range(50))
    recorder = Recorder()
    consumer = BatchConsumer(SPEC, recorder, batch=16, wait_s=0.05)
    consumer.start(nc, js)
    try:
        await publish(js, range(50, 70))  # some arrive while it reads
        await eventually(lambda: settled(js), timeout=10)
    finally:
        await consumer.stop()
    assert recorder.handled() == list(range(70))
    assert max(map(len, recorder.batches)) == 16


async def test_a_failed_batch_comes_back_with_what_was_fetched_meanwhile(
    bus: tuple[Client, JetStreamContext],
) -> None:
    nc, js = bus
    await publish(js, range(40))
    recorder = Recorder(fail_first=1)
    consumer = BatchConsumer(SPEC, recorder, batch=10, wait_s=0.05, retry_delay_s=0.2)
    consumer.start(nc, js)
    try:
        await eventually(lambda: settled(js), timeout=10)
    finally:
        await consumer.stop()
    assert recorder.batches[0] == list(range(10))
    assert sorted(set(recorder.handled())) == list(range(40))
    assert recorder.handled()[10:20] == list(range(10))  # the failed batch came back first


async def test_a_stop_hands_back_what_it_fetched_but_did_not_hand_over(
    bus: tuple[Client, JetStreamContext],
) -> None:
    nc, js = bus
    await publish(js, range(30))
    hold = asyncio.Event()
    first = Recorder(hold=hold)
    consumer = BatchConsumer(SPEC, first, batch=10, wait_s=0.05)
    consumer.start(nc, js)
    await eventually(lambda: first.batches, timeout=10)
    stopping = asyncio.create_task(consumer.stop())
    hold.set()
    await stopping
    assert first.handled() == list(range(10))

    second = Recorder()
    restarted = BatchConsumer(SPEC, second, batch=10, wait_s=0.05)
    restarted.start(nc, js)
    try:  # well before the 30 s ack wait of what the first one had fetched ahead
        await eventually(lambda: settled(js), timeout=5)
    finally:
        await restarted.stop()
    assert sorted(second.handled()) == list(range(10, 30))


async def test_a_batch_that_exhausts_its_deliveries_becomes_dead_letters(
    bus: tuple[Client, JetStreamContext],
) -> None:
    """With `dead_letters_as`, the consumer's own watcher parks what it gave up on."""
    nc, js = bus
    await provision(js, stream_specs=[DLQ], buckets=())
    spec = replace(SPEC, name="doomed", max_deliver=2)
    await publish(js, range(3))
    recorder = Recorder(fail_first=1_000)
    consumer = BatchConsumer(
        spec, recorder, batch=16, wait_s=0.05, retry_delay_s=0.05, dead_letters_as="tests"
    )
    consumer.start(nc, js)

    async def parked() -> list[DeadLetter] | None:
        state = (await js.stream_info(DLQ.name)).state
        if state.messages < 3:
            return None
        seqs = range(state.first_seq, state.last_seq + 1)
        return [decode_dead_letter((await js.get_msg(DLQ.name, s)).data or b"") for s in seqs]

    try:
        records = await eventually(parked, timeout=15)
    finally:
        await consumer.stop()
    assert sorted(r.stream_seq for r in records) == [1, 2, 3]
    assert {(r.service, r.consumer, r.reason) for r in records} == {
        ("tests", "doomed", "max deliveries exhausted")
    }
    assert len(recorder.batches) >= 2


# --- the pull requests under it ---------------------------------------------------------------


@pytest.fixture
async def pull(bus: tuple[Client, JetStreamContext]) -> Pull:
    """A `Pull` of the durable, opened (the durable created as provisioning would)."""
    nc, js = bus
    await js.add_consumer(STREAM, SPEC.config())
    opened = Pull(nc, STREAM, SPEC.name)
    await opened.open()
    return opened


async def test_first_takes_a_backlog_up_to_the_batch_at_once(
    bus: tuple[Client, JetStreamContext], pull: Pull
) -> None:
    _, js = bus
    await publish(js, range(10))
    got = await pull.first(4, wait=5.0)
    assert [int(m.data) for m in got] == [0, 1, 2, 3]
    assert [int(m.data) for m in await pull.first(4, wait=5.0)] == [4, 5, 6, 7]
    assert await pull.close(1.0) == []  # asked for no more than it took


async def test_first_answers_with_the_first_arrival_while_a_long_request_is_open(
    bus: tuple[Client, JetStreamContext], pull: Pull
) -> None:
    _, js = bus
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
    bus: tuple[Client, JetStreamContext], pull: Pull
) -> None:
    _, js = bus
    await publish(js, range(1))
    got = await pull.first(16, wait=1.0)  # a no-wait request: it is answered and done
    assert [int(m.data) for m in got] == [0]
    await pull.expect(16 - len(got), 0.5)
    await publish(js, range(1, 4))
    await asyncio.sleep(0.2)
    assert [int(m.data) for m in pull.in_hand(16)] == [1, 2, 3]
    assert pull.in_hand(16) == []
    await pull.close(1.0)


async def test_close_waits_out_the_open_request_so_nothing_lands_on_a_dead_inbox(
    bus: tuple[Client, JetStreamContext], pull: Pull
) -> None:
    _, js = bus
    await pull.expect(8, 0.5)
    closing = asyncio.ensure_future(pull.close(2.0))
    await asyncio.sleep(0.1)
    await publish(js, range(2))  # delivered to the open request before it expires
    left = await asyncio.wait_for(closing, 5)
    assert [int(m.data) for m in left] == [0, 1]
    info = await js.consumer_info(STREAM, SPEC.name)
    assert info.num_ack_pending == 2  # handed to the caller, who naks or acks them


async def test_a_durable_changed_behind_provisionings_back_is_reported_at_start(
    bus: tuple[Client, JetStreamContext],
) -> None:
    """The config check of every start: the reader says which field differs and how to repair
    it, and never rewrites its durable itself."""
    nc, js = bus
    await js.add_consumer(STREAM, replace(SPEC, filter_subjects=("ct.nothing",)).config())
    recorder = Recorder()
    consumer = BatchConsumer(SPEC, recorder, batch=10, wait_s=0.05)
    with structlog.testing.capture_logs() as logs:
        consumer.start(nc, js)
        try:
            await eventually(lambda: [e for e in logs if e["event"] == "durable_drift"], timeout=5)
        finally:
            await consumer.stop()
    [drift] = [e for e in logs if e["event"] == "durable_drift"]
    assert drift["field"] == "filter_subjects"
    assert drift["repair"] == "tavern init --apply-drift"
    info = await js.consumer_info(STREAM, SPEC.name)
    assert info.config.filter_subjects == ["ct.nothing"]
