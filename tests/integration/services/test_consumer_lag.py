"""`/metrics` reports the lag of a service's durable consumers, read from JetStream."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import nats
import pytest
from faststream import FastStream
from faststream.nats import JStream, PullSub

from tavern_runtime.bus import build_broker
from tavern_runtime.provision import ConsumerSpec, durables_of, provision
from tavern_runtime.service import RESOURCES_KEY, ServiceResources, serve
from tavern_runtime.settings import TavernSettings
from tests.support import eventually, has_samples

pytestmark = pytest.mark.integration


async def test_metrics_show_pending_and_ack_pending_of_a_durable(
    tmp_path: Path, nats_url: str
) -> None:
    consumer = ConsumerSpec("probe", "SESSIONS", ("tavern.session.>",), max_deliver=3)
    nc = await nats.connect(nats_url)
    await provision(nc.jetstream(), consumers=[consumer])
    settings = TavernSettings(nats_url=nats_url, data_dir=tmp_path, health_port=0)
    broker = build_broker(settings, "probe", on_lost=lambda: None)
    release = asyncio.Event()

    async def hold(body: dict[str, object]) -> None:
        await release.wait()

    broker.subscriber(
        "tavern.session.>",
        stream=JStream("SESSIONS", declare=False),
        durable="probe",
        pull_sub=PullSub(batch_size=1),
    )(hold)

    stop = asyncio.Event()
    task = asyncio.create_task(serve("probe", FastStream(broker), settings, stop=stop))
    try:
        for i in range(3):
            await nc.jetstream().publish(f"tavern.session.s{i}.session.created", b"{}")
        url = await eventually(lambda: _health_url(tmp_path), timeout=10)
        wanted = [
            'tavern_consumer_ack_pending{service="probe",stream="SESSIONS",consumer="probe"} 1',
            'tavern_consumer_pending{service="probe",stream="SESSIONS",consumer="probe"} 2',
        ]
        await eventually(lambda: _metrics_have(url, wanted), timeout=10, interval=0.2)
    finally:
        release.set()
        stop.set()
        assert await asyncio.wait_for(task, 20) == 0
        await nc.close()


async def test_metrics_show_the_lag_of_consumers_the_service_reads_with_its_own_loop(
    tmp_path: Path, nats_url: str
) -> None:
    """A durable read by the service's own pull loop (no FastStream subscriber) is named in
    `ServiceResources.durables` and its lag is on `/metrics` too."""
    consumer = ConsumerSpec("own-loop", "SESSIONS", ("tavern.session.>",), max_deliver=3)
    nc = await nats.connect(nats_url)
    await provision(nc.jetstream(), consumers=[consumer])
    settings = TavernSettings(nats_url=nats_url, data_dir=tmp_path, health_port=0)
    broker = build_broker(settings, "owner", on_lost=lambda: None)
    app = FastStream(broker)
    app.context.set_global(RESOURCES_KEY, ServiceResources(durables=durables_of([consumer])))
    stop = asyncio.Event()
    task = asyncio.create_task(serve("owner", app, settings, stop=stop))
    try:
        for i in range(4):
            await nc.jetstream().publish(f"tavern.session.s{i}.session.created", b"{}")
        url = await eventually(lambda: _health_url(tmp_path, "owner"), timeout=10)
        wanted = [
            'tavern_consumer_pending{service="owner",stream="SESSIONS",consumer="own-loop"} 4'
        ]
        await eventually(lambda: _metrics_have(url, wanted), timeout=10, interval=0.2)
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 20) == 0
        await nc.close()


def _health_url(data_dir: Path, name: str = "probe") -> str | None:
    record = data_dir / "run" / f"{name}.health"
    return str(json.loads(record.read_text())["url"]) if record.exists() else None


async def _metrics_have(url: str, lines: list[str]) -> bool:
    async with httpx.AsyncClient(timeout=5) as client:
        text = (await client.get(f"{url}/metrics")).text
    return has_samples(text, lines)


async def test_stop_lets_an_in_flight_handler_finish_and_ack(tmp_path: Path, nats_url: str) -> None:
    consumer = ConsumerSpec("slow", "SESSIONS", ("tavern.session.>",), max_deliver=3)
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await provision(js, consumers=[consumer])
    settings = TavernSettings(
        nats_url=nats_url, data_dir=tmp_path, health_port=0, shutdown_grace_s=10
    )
    broker = build_broker(settings, "slow", on_lost=lambda: None)
    started, finished = asyncio.Event(), asyncio.Event()

    async def slow(body: dict[str, object]) -> None:
        started.set()
        await asyncio.sleep(1.0)
        finished.set()

    broker.subscriber(
        "tavern.session.>",
        stream=JStream("SESSIONS", declare=False),
        durable="slow",
        pull_sub=PullSub(batch_size=1),
    )(slow)

    stop = asyncio.Event()
    task = asyncio.create_task(serve("slow", FastStream(broker), settings, stop=stop))
    await js.publish("tavern.session.s1.session.created", b"{}")
    await asyncio.wait_for(started.wait(), 10)
    stop.set()
    assert await asyncio.wait_for(task, 20) == 0
    assert finished.is_set()
    info = await js.consumer_info("SESSIONS", "slow")
    assert (info.num_ack_pending, info.num_pending, info.ack_floor.stream_seq) == (0, 0, 1)
    await nc.close()
