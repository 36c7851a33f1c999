"""Replay over the bus (`tavern.rpc.projector.replay.start` / `replay.status`): the operator
(or a service on its own account: the gateway, for its owner) starts a rebuild, watches its
progress reach the total, and finds the read model as before; a user, or a service acting for
one, is refused; a bad plan and an unknown job get clear answers."""

from __future__ import annotations

from typing import Any

import pytest

from tavern_runtime import principals
from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import converse, files
from tests.support import auth, eventually, signed_user

pytestmark = pytest.mark.integration


async def test_the_operator_replays_a_projection_and_watches_its_progress(
    projector: Projector,
) -> None:
    await converse(projector)
    before = files(projector.chats)
    started = await projector.rpc("replay.start", {"projection": "chat"})
    assert "error" not in started, started
    assert started["state"] in ("running", "done")
    job = started["job_id"]
    seen: list[dict[str, Any]] = []

    async def finished() -> dict[str, Any]:
        found = await projector.rpc("replay.status", {"job_id": job})
        seen.append(found)
        return found if found["state"] != "running" else {}

    done = await eventually(finished, timeout=30, interval=0.05)
    assert done["state"] == "done", done
    assert done["total"] > 0
    assert done["done"] == done["total"]
    assert done["entries"] == done["total"]
    assert all(s["done"] <= s["total"] or s["total"] == 0 for s in seen)
    assert files(projector.chats) == before
    gateway = auth(principals.service("gateway"))  # the owner's operator view asks as it
    assert (await projector.rpc("replay.status", {"job_id": job}, headers=gateway))["state"] == (
        "done"
    )


async def test_a_replay_is_the_operators_and_bad_requests_are_answered(
    projector: Projector,
) -> None:
    refused = await projector.rpc(
        "replay.start", {"projection": "chat"}, headers=signed_user("alice")
    )
    assert refused["error"]["code"] == "forbidden"
    status = await projector.rpc("replay.status", {"job_id": "x"}, headers=signed_user("alice"))
    assert status["error"]["code"] == "forbidden"
    for_alice = auth(principals.service("gateway").acting_for("alice"))
    acting = await projector.rpc("replay.start", {"projection": "chat"}, headers=for_alice)
    assert acting["error"]["code"] == "forbidden"
    unknown = await projector.rpc("replay.start", {"projection": "nonsense"})
    assert unknown["error"]["code"] == "invalid"
    assert "unknown projection" in unknown["error"]["message"]
    archive = await projector.rpc("replay.start", {"projection": "memory", "from_archive": True})
    assert archive["error"]["code"] == "invalid"
    missing = await projector.rpc("replay.status", {"job_id": "replay-none"})
    assert missing["error"]["code"] == "not_found"
