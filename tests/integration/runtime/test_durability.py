"""An acknowledged append survives kill -9 of the server (embedded config: fsync always)."""

from __future__ import annotations

import nats.errors
import pytest

from tavern_events.envelope import SessionEvent
from tavern_runtime.bus import NatsConnection
from tavern_runtime.embedded import EmbeddedNats
from tavern_runtime.sessionlog import SessionLogReader, SessionLogWriter
from tests.integration.runtime.builders import said, step
from tests.support import eventually

pytestmark = pytest.mark.integration


async def jetstream_answers(conn: NatsConnection) -> bool:
    """The client may not have noticed the crash yet: its first request can be lost."""
    try:
        await conn.nc.jetstream(timeout=1).stream_info("SESSIONS")
    except nats.errors.Error:
        return False
    return True


async def test_acked_appends_survive_kill_9_and_restart(
    provisioned: NatsConnection, nats_server: EmbeddedNats
) -> None:
    writer = SessionLogWriter(provisioned.nc)
    acked: list[SessionEvent] = []
    for i in range(20):
        result = await writer.append("s1", [said("s1", str(i))], expected_last=i)
        acked.extend(result.events)
    batch = await writer.append("s1", [step("s1"), step("s1", 2)], expected_last=20)
    acked.extend(batch.events)

    nats_server.kill()
    nats_server.start()
    await eventually(lambda: jetstream_answers(provisioned), timeout=20)

    replayed = await SessionLogReader(provisioned.js).events("s1")
    assert replayed == acked
    head = await writer.head("s1")
    assert head.log_seq == 22
    after = await writer.append("s1", [step("s1", 3)], expected_last=22)
    assert after.events[0].seq == 23
