"""A bench stream's creation asks again when its reply is lost (a cluster settling its routes),
and gives up with the error after its attempts."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import StreamConfig

from bench.baselines import created


class Unanswered:
    """Stands in for the JetStream API: its first `lost` creations get no reply."""

    def __init__(self, lost: int) -> None:
        self.lost, self.asked = lost, 0

    async def add_stream(self, config: StreamConfig) -> Any:
        self.asked += 1
        if self.asked <= self.lost:
            raise NatsTimeout
        return config


def test_a_lost_reply_is_asked_again() -> None:
    api = Unanswered(lost=2)
    asyncio.run(created(cast(JetStreamContext, api), StreamConfig(name="BENCH"), attempts=3))
    assert api.asked == 3


def test_it_gives_up_after_its_attempts() -> None:
    api = Unanswered(lost=5)
    with pytest.raises(NatsTimeout):
        asyncio.run(created(cast(JetStreamContext, api), StreamConfig(name="BENCH"), attempts=3))
    assert api.asked == 3
