"""The projector's stream reads leave their consumers to expire: no service may delete a
consumer (deploy/nats/accounts.conf), and asking is refused on the connection."""

from __future__ import annotations

import pytest
from nats.aio.msg import Msg

from tavern_events.streams import SESSIONS
from tavern_projector import sources
from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import converse

pytestmark = pytest.mark.integration


async def test_a_read_asks_no_consumer_delete_and_its_consumers_expire(
    projector: Projector,
) -> None:
    await converse(projector)
    js, nc = projector.bus.js, projector.bus.nc
    deletes: list[str] = []

    async def seen(msg: Msg) -> None:
        deletes.append(msg.subject)

    watch = await nc.subscribe("$JS.API.CONSUMER.DELETE.>", cb=seen)
    before = {c.name for c in await js.consumers_info(SESSIONS.name)}
    filters = ["tavern.session.s1.>", "tavern.session.s2.>"]  # two filters: a wider read too
    read = [e async for batch in sources.stream_batches(js, SESSIONS.name, filters) for e in batch]
    waiting = await sources.pending(js, SESSIONS.name, ["tavern.session.>"])
    await nc.flush()

    assert read
    assert waiting >= len(read)
    assert deletes == []
    await watch.unsubscribe()
    left = [c for c in await js.consumers_info(SESSIONS.name) if c.name not in before]
    assert left, "the read consumers are still there, to expire"
    assert all(c.config.inactive_threshold == sources.INACTIVE_S for c in left)
