"""`tavern restore`: a deleted SESSIONS stream comes back from the archive, same ids, same
order, and the loop carries on the session."""

from __future__ import annotations

import pytest

from tavern_events.streams import SESSIONS
from tavern_projector import catalog, restore
from tavern_runtime.errors import ConfigurationError
from tavern_runtime.provision import provision
from tests.integration.projector.conftest import Projector, msg_id
from tests.integration.projector.scenes import converse

pytestmark = pytest.mark.integration


async def stored(projector: Projector) -> list[tuple[int, str, str | None, bytes]]:
    js, found = projector.bus.js, []
    last = (await js.stream_info(SESSIONS.name)).state.last_seq
    for seq in range(1, last + 1):
        msg = await js.get_msg(SESSIONS.name, seq)
        found.append((seq, msg.subject or "", msg_id(msg.headers), msg.data or b""))
    return found


async def test_restore_rebuilds_a_deleted_stream_and_the_loop_continues(
    projector: Projector,
) -> None:
    await converse(projector, fork=False)
    before = await stored(projector)
    chat = projector.chat_file("v2_mira/s1").read_bytes()
    with pytest.raises(ConfigurationError, match="holds"):
        await restore.restore(projector.pool, projector.bus.js, lambda n: None)

    await projector.bus.js.delete_stream(SESSIONS.name)
    counted: list[int] = []
    report = await restore.restore(projector.pool, projector.bus.js, counted.append)
    await provision(projector.bus.js, stream_specs=[], consumers=catalog.CONSUMERS, buckets=())
    assert (report.events, report.sessions, report.moved) == (len(before), {"s1"}, [])
    assert sum(counted) == len(before)
    assert await stored(projector) == before

    await projector.bus.say("s1", "Still there after the storm?")
    log = await projector.bus.turns_ended("s1", 3)
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    await projector.caught_up()
    after = projector.chat_file("v2_mira/s1").read_bytes()
    assert after.startswith(chat)
    assert after.count(b"\n") == chat.count(b"\n") + 2
