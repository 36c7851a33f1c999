"""Provisioning asks again when a creation's reply is lost (a cluster settling its routes can
drop it after the server made the resource): the second asking finds it made, and a reply
that never comes is raised after the attempts."""

from __future__ import annotations

import json

import nats
import pytest
from nats.aio.client import Client
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import StreamConfig, StreamInfo
from nats.js.errors import NotFoundError

from tavern_events import streams
from tavern_runtime.provision import ConsumerSpec, answered, provision, stream_config
from tests.support import eventually

pytestmark = pytest.mark.integration


async def create_unanswered(nc: Client, config: StreamConfig) -> None:
    """Ask the server to create a stream with a reply subject nobody listens on: it is made,
    and its answer is lost."""
    name = config.name or ""
    request = json.dumps(config.as_dict()).encode()
    await nc.publish(f"$JS.API.STREAM.CREATE.{name}", request, reply="lost.reply")
    await nc.flush()

    async def made() -> bool:
        try:
            return bool(await nc.jetstream().stream_info(name))
        except NotFoundError:
            return False

    await eventually(made)


async def test_a_creation_whose_reply_was_lost_is_asked_again(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        js, config = nc.jetstream(timeout=10), stream_config(streams.DLQ)
        tries: list[str] = []

        async def create() -> StreamInfo:
            tries.append("asked")
            if len(tries) == 1:
                await create_unanswered(nc, config)
                raise NatsTimeout
            return await js.add_stream(config)

        made = await answered("stream DLQ", create)
        assert tries == ["asked", "asked"]
        info = await js.stream_info(streams.DLQ.name)
        assert made.config.name == info.config.name == streams.DLQ.name
        assert info.config.subjects == list(streams.DLQ.subjects)
    finally:
        await nc.close()


async def test_a_reply_that_never_comes_is_raised_after_the_attempts() -> None:
    tries: list[str] = []

    async def create() -> object:
        tries.append("asked")
        raise NatsTimeout

    with pytest.raises(NatsTimeout):
        await answered("stream DLQ", create, attempts=3)
    assert tries == ["asked"] * 3


async def test_provisioning_after_a_lost_reply_reports_what_it_finds(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        await create_unanswered(nc, stream_config(streams.DLQ))
        spec = ConsumerSpec("dlq-reader", streams.DLQ.name, ("tavern.dlq.>",))
        report = await provision(
            nc.jetstream(timeout=10), stream_specs=(streams.DLQ,), consumers=(spec,), buckets=()
        )
        assert report.ok, report.lines()
        assert report.created == [f"consumer {streams.DLQ.name}/dlq-reader"]
        assert report.unchanged == [f"stream {streams.DLQ.name}"]
    finally:
        await nc.close()
