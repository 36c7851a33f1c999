"""Awaited publishes over one reply subscription (`tavern_runtime.acks`), against a real server."""

from __future__ import annotations

import asyncio
import time

import nats.errors
import pytest
from nats.aio.msg import Msg
from nats.js.errors import APIError, NoStreamResponseError

from tavern_runtime.acks import Acks
from tavern_runtime.bus import NatsConnection

pytestmark = pytest.mark.integration


async def test_publishes_are_acknowledged_in_order(provisioned: NatsConnection) -> None:
    acks = Acks(provisioned.nc)
    first = await acks.publish("tavern.session.a1.step.start", b"{}", headers={}, timeout=5)
    many = await asyncio.gather(
        *(
            acks.publish(f"tavern.session.a{i}.step.start", b"{}", headers={}, timeout=5)
            for i in range(20)
        )
    )
    assert first.stream == "SESSIONS"
    assert sorted(a.seq for a in many) == list(range(first.seq + 1, first.seq + 21))
    again = await acks.publish(
        "tavern.session.a1.step.start", b"{}", headers={"Nats-Msg-Id": "m1"}, timeout=5
    )
    duplicate = await acks.publish(
        "tavern.session.a1.step.start", b"{}", headers={"Nats-Msg-Id": "m1"}, timeout=5
    )
    assert duplicate.duplicate
    assert duplicate.seq == again.seq


async def test_a_refusal_is_the_streams_error(provisioned: NatsConnection) -> None:
    acks = Acks(provisioned.nc)
    with pytest.raises(APIError) as refused:
        await acks.publish(
            "tavern.session.a1.step.start",
            b"{}",
            headers={"Nats-Expected-Last-Subject-Sequence": "99"},
            timeout=5,
        )
    assert refused.value.err_code == 10071


async def test_no_stream_and_no_answer(provisioned: NatsConnection) -> None:
    acks = Acks(provisioned.nc)
    with pytest.raises(NoStreamResponseError):
        await acks.publish("nowhere.at.all", b"{}", headers={}, timeout=5)
    silent = await provisioned.nc.subscribe("silent.listener")  # takes it, never answers
    with pytest.raises(nats.errors.TimeoutError):
        await acks.publish("silent.listener", b"{}", headers={}, timeout=0.2)
    await silent.unsubscribe()
    assert acks.pending == 0  # nothing left behind by the refused or unanswered publishes
    await acks.close()


async def test_each_publish_keeps_its_own_deadline_under_the_shared_timer(
    provisioned: NatsConnection,
) -> None:
    acks = Acks(provisioned.nc)
    held: asyncio.Queue[Msg] = asyncio.Queue()
    slow = await provisioned.nc.subscribe("slow.listener", cb=held.put)
    silent = await provisioned.nc.subscribe("silent.listener")
    patient = asyncio.ensure_future(acks.publish("slow.listener", b"{}", headers={}, timeout=30))
    request = await asyncio.wait_for(held.get(), 5)
    started = time.monotonic()
    with pytest.raises(nats.errors.TimeoutError):  # shorter than the deadline already set
        await acks.publish("silent.listener", b"{}", headers={}, timeout=0.2)
    assert time.monotonic() - started < 2
    assert acks.pending == 1
    await request.respond(b'{"stream":"SESSIONS","seq":7}')
    assert (await asyncio.wait_for(patient, 5)).seq == 7
    assert acks.pending == 0
    await slow.unsubscribe()
    await silent.unsubscribe()
    await acks.close()
