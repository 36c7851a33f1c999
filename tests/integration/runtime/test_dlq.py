"""Dead letters: a poison message is parked with its reason and the consumer moves on."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import nats.errors
import pytest
from faststream.nats import JStream, NatsMessage, PullSub

from tavern_events.dlq import DeadLetter, decode_dead_letter
from tavern_runtime.bus import NatsConnection, build_broker
from tavern_runtime.dlq import dead_letter, watch_max_deliveries
from tavern_runtime.provision import ConsumerSpec, provision
from tavern_runtime.settings import TavernSettings
from tests.support import eventually

pytestmark = pytest.mark.integration

DISPATCH = ConsumerSpec(
    "loop-dispatch", "INPUTS", ("tavern.input.>",), max_deliver=2, ack_wait_s=1.0
)


async def dead_letters(conn: NatsConnection) -> list[DeadLetter]:
    state = (await conn.js.stream_info("DLQ")).state
    if not state.messages:
        return []
    seqs = range(state.first_seq, state.last_seq + 1)
    return [decode_dead_letter((await conn.js.get_msg("DLQ", s)).data or b"") for s in seqs]


async def publish_inputs(conn: NatsConnection, *bodies: bytes) -> None:
    for i, body in enumerate(bodies):
        await conn.js.publish("tavern.input.s1.message", body, headers={"Nats-Msg-Id": f"in-{i}"})


async def test_dead_letter_parks_the_message_and_the_consumer_continues(
    conn: NatsConnection,
) -> None:
    await provision(conn.js, consumers=[DISPATCH])
    await publish_inputs(conn, b"poison", b'{"ok": true}')
    sub = await conn.js.pull_subscribe_bind("loop-dispatch", stream="INPUTS")
    [poison] = await sub.fetch(1, timeout=2)
    record = await dead_letter(
        conn.js,
        poison,
        service="loop",
        consumer="loop-dispatch",
        reason="not an input",
        error=ValueError("bad"),
    )
    [good] = await sub.fetch(1, timeout=2)
    assert good.data == b'{"ok": true}'
    await good.ack()

    [stored] = await dead_letters(conn)
    assert stored == record
    assert (stored.reason, stored.error_type, stored.stream_seq) == (
        "not an input",
        "ValueError",
        1,
    )
    assert (stored.subject, stored.deliveries) == ("tavern.input.s1.message", 1)
    assert stored.headers["Nats-Msg-Id"] == "in-0"
    assert stored.data() == b"poison"
    with pytest.raises(nats.errors.TimeoutError):
        await sub.fetch(1, timeout=1.5)  # terminated: never redelivered, even after ack_wait
    await sub.unsubscribe()  # nats-py: a pull sub whose fetch timed out never drains
    info = await conn.js.consumer_info("INPUTS", "loop-dispatch")
    assert (info.num_ack_pending, info.num_redelivered) == (0, 0)


async def test_dead_letter_twice_keeps_one_record(conn: NatsConnection) -> None:
    await provision(conn.js, consumers=[DISPATCH])
    await publish_inputs(conn, b"poison")
    sub = await conn.js.pull_subscribe_bind("loop-dispatch", stream="INPUTS")
    [poison] = await sub.fetch(1, timeout=2)
    for _ in range(2):
        await dead_letter(conn.js, poison, service="loop", consumer="c", reason="r")
    assert len(await dead_letters(conn)) == 1


async def test_exhausted_redeliveries_are_dead_lettered_from_the_advisory(
    conn: NatsConnection,
) -> None:
    await provision(conn.js, consumers=[DISPATCH])
    await watch_max_deliveries(conn.nc, conn.js, service="loop", stream="INPUTS")
    await publish_inputs(conn, b"always fails")
    sub = await conn.js.pull_subscribe_bind("loop-dispatch", stream="INPUTS")
    for _ in range(DISPATCH.max_deliver):
        [msg] = await sub.fetch(1, timeout=3)
        await msg.nak()

    async def parked() -> list[DeadLetter]:
        with contextlib.suppress(nats.errors.TimeoutError):
            await sub.fetch(1, timeout=0.2)  # a waiting pull lets the server give up on it
        return await dead_letters(conn)

    [record] = await eventually(parked, timeout=10)
    await sub.unsubscribe()  # nats-py: a pull sub whose fetch timed out never drains
    assert record.reason == "max deliveries exhausted"
    assert (record.consumer, record.stream_seq, record.deliveries) == ("loop-dispatch", 1, 2)
    assert record.data() == b"always fails"


async def test_faststream_handler_dead_letters_poison_and_handles_the_rest(
    conn: NatsConnection, settings: TavernSettings
) -> None:
    await provision(conn.js, consumers=[DISPATCH])
    handled: list[dict[str, Any]] = []
    broker = build_broker(settings, "dlq-test", on_lost=lambda: None)

    async def on_input(body: Any, msg: NatsMessage) -> None:
        try:
            handled.append(json.loads(msg.body))
        except ValueError as exc:
            await dead_letter(
                conn.js,
                msg.raw_message,
                service="loop",
                consumer="loop-dispatch",
                reason="not JSON",
                error=exc,
            )

    broker.subscriber(
        "tavern.input.>",
        stream=JStream("INPUTS", declare=False),
        durable="loop-dispatch",
        pull_sub=PullSub(batch_size=1, timeout=0.2),
    )(on_input)

    async with broker:
        await broker.start()
        await publish_inputs(conn, b'{"n": 1}', b"{oops", b'{"n": 2}')
        await eventually(lambda: len(handled) == 2)
    [record] = await dead_letters(conn)
    assert (record.stream_seq, record.reason, record.error_type) == (
        2,
        "not JSON",
        "JSONDecodeError",
    )
    info = await conn.js.consumer_info("INPUTS", "loop-dispatch")
    assert (info.num_ack_pending, info.num_pending, info.num_redelivered) == (0, 0, 0)
