"""Principals through the running projector: Bob cannot read Alice's chat or session by naming
it, lists only his own sessions, and the projection status is not his to see; Alice, the
operator and the loop acting for Alice can; a request without a principal is refused."""

from __future__ import annotations

import json

import nats
import pytest

from tavern_runtime import principals
from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import scripted_turn
from tests.support import auth, signed_user

pytestmark = pytest.mark.integration

ALICE, BOB = signed_user("alice"), signed_user("bob")  # signed when used


async def alice_and_bob(projector: Projector) -> None:
    await projector.create_session("a1", owner="alice")
    await projector.create_session("b1", owner="bob")
    await scripted_turn(projector, "a1", 1, "The lighthouse key is under the mat.", "Noted.")
    await scripted_turn(projector, "b1", 1, "Bob's own words.", "Fine.")
    await projector.caught_up("sessions", "history", "chat")


async def test_bob_cannot_read_alices_chat_or_session_by_naming_it(projector: Projector) -> None:
    await alice_and_bob(projector)
    for operation, body in [
        ("history.search", {"session_id": "a1", "query": "lighthouse key"}),
        ("scene.get", {"session_id": "a1"}),
        ("lore.search", {"session_id": "a1"}),
        ("character.get", {"session_id": "a1"}),
        ("status", {}),
    ]:
        reply = await projector.rpc(operation, body, headers=BOB)
        assert reply.get("error", {}).get("code") == "forbidden", (operation, reply)
        assert "lighthouse" not in json.dumps(reply)
    loop_for_bob = auth(principals.service("loop").acting_for("bob"))
    reply = await projector.rpc(
        "history.search", {"session_id": "a1", "query": "lighthouse"}, headers=loop_for_bob
    )
    assert reply["error"]["code"] == "forbidden"


async def test_alice_the_operator_and_the_loop_for_alice_read_her_chat(
    projector: Projector,
) -> None:
    await alice_and_bob(projector)
    body = {"session_id": "a1", "query": "lighthouse key"}
    loop_for_alice = auth(principals.service("loop").acting_for("alice"))
    for headers in (ALICE, auth(), loop_for_alice):
        found = await projector.rpc("history.search", body, headers=headers)
        assert "lighthouse key" in json.dumps(found).lower(), found
        scene = await projector.rpc("scene.get", {"session_id": "a1"}, headers=headers)
        assert scene["session_id"] == "a1"


async def test_each_user_lists_only_their_own_sessions(projector: Projector) -> None:
    await alice_and_bob(projector)
    listed = {
        who: [s["session_id"] for s in (await projector.rpc("sessions.list", {}, h))["sessions"]]
        for who, h in (("alice", ALICE), ("bob", BOB), ("operator", auth()))
    }
    assert listed["alice"] == ["a1"]
    assert listed["bob"] == ["b1"]
    assert sorted(listed["operator"]) == ["a1", "b1"]


async def test_a_request_without_a_principal_is_refused(projector: Projector) -> None:
    await alice_and_bob(projector)
    plain = await nats.connect(projector.bus.url)
    try:
        raw = await plain.request(
            "tavern.rpc.projector.history.search",
            json.dumps({"session_id": "a1", "query": "lighthouse"}).encode(),
            timeout=5,
        )
    finally:
        await plain.close()
    reply = json.loads(raw.data)
    assert reply["error"]["code"] == "unauthenticated"
    assert "lighthouse" not in json.dumps(reply)
