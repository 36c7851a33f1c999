"""Principals through the running projector: Bob cannot read Alice's chat or session by naming
it, lists only his own sessions, and the projection status is not his to see; Alice, the
operator and the loop acting for Alice can; a request without a principal is refused. Cards,
lorebooks and personas belong to who imported them: another user's is `not_found`, exactly like
one that does not exist, and a replay of ASSETS rebuilds the same owners."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import nats
import pytest
from structlog.testing import capture_logs

from tavern_events import subjects
from tavern_events.streams import ASSETS
from tavern_events.union import encode
from tavern_projector import operations
from tavern_projector.core import options_of
from tavern_runtime import principals
from tavern_runtime.cards import cards, importer
from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import CARDS, scripted_turn
from tests.support import auth, signed_user

pytestmark = pytest.mark.integration

ALICE, BOB = signed_user("alice"), signed_user("bob")  # signed when used
LOCAL = signed_user("local")  # the install's owner (the web app's first account)


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


# --- assets: cards, lorebooks and personas belong to who imported them -----------------------


async def import_as(projector: Projector, name: str, owner: str) -> str:
    found = await importer.import_file(
        projector.bus.js, CARDS / name, projector.settings.data_dir, owner=owner
    )
    return found.asset.asset_id


async def test_each_user_reads_only_their_own_cards_and_another_users_is_not_found(
    projector: Projector,
) -> None:
    alices = await import_as(projector, "v2_mira.png", "alice")
    bobs = await import_as(projector, "v2_mira.png", "bob")
    locals_ = await import_as(projector, "v2_mira.png", "local")
    await projector.caught_up("assets")
    assert len({alices, bobs, locals_}) == 3, "the same card imported by three owners is three"

    body = {"character": alices, "fields": ["name", "description"]}
    mine = await projector.rpc("character.get", body, headers=ALICE)
    assert (mine["name"], mine["source"]["id"], mine["source"]["owner"]) == (
        "Mira",
        alices,
        "alice",
    )
    with capture_logs() as logs:
        refused = await projector.rpc("character.get", body, headers=BOB)
    missing = await projector.rpc(
        "character.get", {"character": "no-such-card", "fields": ["name"]}, headers=BOB
    )
    assert refused["error"]["code"] == missing["error"]["code"] == "not_found"
    assert refused["error"]["message"] == f"no character {alices!r}", "nothing says it exists"
    assert "lighthouse" not in json.dumps(refused).lower()
    said = [e for e in logs if e["event"] == "access_refused"]
    assert said
    assert said[0]["principal"] == "user:bob"
    assert said[0]["asset"] == alices
    loop_for_bob = auth(principals.service("loop").acting_for("bob"))
    assert (await projector.rpc("character.get", body, headers=loop_for_bob))["error"][
        "code"
    ] == "not_found"

    by_name = {"character": "Mira", "fields": ["name"]}
    for headers, owner, asset in ((ALICE, "alice", alices), (BOB, "bob", bobs)):
        found = await projector.rpc("character.get", by_name, headers=headers)
        assert (found["source"]["id"], found["source"]["owner"]) == (asset, owner)
    carol = await projector.rpc("character.get", by_name, headers=signed_user("carol"))
    assert carol["error"]["code"] == "not_found", "a user with no Mira sees none"
    for asset in (alices, bobs, locals_):  # the operator and a service on its own reach all
        for caller in (auth(), auth(principals.service("loop"))):
            found = await projector.rpc("character.get", {"character": asset}, headers=caller)
            assert found["source"]["id"] == asset


async def test_a_session_bound_to_another_users_card_reads_nothing_of_it(
    projector: Projector,
) -> None:
    alices = await import_as(projector, "v2_mira.png", "alice")
    await import_as(projector, "world_cael.json", "alice")
    await projector.caught_up("assets")
    await projector.create_session("b1", owner="bob", character_id=alices)
    await projector.create_session("a1", owner="alice", character_id=alices)
    for session_id in ("a1", "b1"):
        await scripted_turn(projector, session_id, 1, "The storm and the lighthouse.", "Yes.")
    await projector.caught_up("sessions", "history", "chat")

    theirs = await projector.rpc("character.get", {"session_id": "b1"}, headers=BOB)
    assert theirs["error"]["code"] == "not_found"
    assert (await projector.rpc("character.get", {"session_id": "a1"}, headers=ALICE))[
        "name"
    ] == "Mira"
    lore = {"query": "the storm at the lighthouse", "books": ["world_cael"]}
    bobs_lore = await projector.rpc("lore.search", {"session_id": "b1", **lore}, headers=BOB)
    alices_lore = await projector.rpc("lore.search", {"session_id": "a1", **lore}, headers=ALICE)
    assert bobs_lore["entries"] == []
    assert bobs_lore["sourceCount"] == 0
    assert [e["comment"] for e in alices_lore["entries"]][:1] == ["Lighthouse"]
    named = await projector.rpc("lore.search", lore, headers=BOB)
    assert named["entries"] == [], "naming another user's book reads nothing"
    scene = await projector.rpc("scene.get", {"session_id": "b1"}, headers=BOB)
    assert scene["scenario"] == ""
    assert scene["character"] != "Mira"
    operator_view = await projector.rpc("scene.get", {"session_id": "a1"})
    assert operator_view["scenario"], "the card of the session's own owner is read"


async def test_personas_belong_to_their_importer(projector: Projector) -> None:
    alices = await import_as(projector, "persona_ren.json", "alice")
    await projector.caught_up("assets")
    body = {"character": alices, "kind": "persona", "fields": ["name"]}
    assert (await projector.rpc("character.get", body, headers=ALICE))["fields"]["name"]
    refused = await projector.rpc("character.get", body, headers=BOB)
    assert refused["error"]["code"] == "not_found"


async def test_a_create_naming_another_users_card_answers_as_one_naming_no_card(
    projector: Projector,
) -> None:
    """Bob's `create` naming Alice's card is answered exactly as one naming an id nobody has:
    the session binds as asked and reads nothing of the card, so nothing says that it exists."""
    alices = await import_as(projector, "v2_mira.png", "alice")
    await import_as(projector, "v2_mira.png", "bob")
    await projector.caught_up("assets")
    await projector.bus.engine()
    creates = {
        "bob-s": (BOB, alices),
        "bob-none": (BOB, "mira-no-such-card"),
        "bob-own": (BOB, "Mira"),
        "alice-s": (ALICE, alices),
        "op-s": (None, alices),  # the operator
    }
    for session_id, (headers, character) in creates.items():
        sent = {"headers": headers} if headers else {}
        await projector.bus.command(session_id, "create", args={"character_id": character}, **sent)
    ends, bound = {}, {}
    for session_id in creates:
        events = await projector.bus.turns_ended(session_id, 1)
        [created] = [e for e in events if e.type == "session/created"]
        [end] = [e for e in events if e.type == "turn/end"]
        bound[session_id] = (created.payload.owner, created.payload.character_id)
        ends[session_id] = (end.payload.outcome, end.payload.reason)
    assert bound == {
        "bob-s": ("bob", alices),
        "bob-none": ("bob", "mira-no-such-card"),
        "bob-own": ("bob", "Mira"),  # by name: his own Mira, though Alice has one too
        "alice-s": ("alice", alices),
        "op-s": ("local", alices),
    }
    assert ends["bob-s"] == ends["bob-none"] == ends["alice-s"]
    await projector.caught_up("sessions")
    scenes = {
        s: await projector.rpc("scene.get", {"session_id": s}, headers=h or auth())
        for s, (h, _) in creates.items()
    }
    own = ("session_id", "chat", "chatId", "lastActivity", "source")  # each session's own
    bobs, nobodys = (
        {k: v for k, v in scenes[s].items() if k not in own} for s in ("bob-s", "bob-none")
    )
    assert bobs == nobodys, "Alice's card reads as no card at all"
    assert scenes["alice-s"]["character"] == "Mira"
    assert "Mira" not in json.dumps(scenes["bob-s"])


async def test_assets_from_before_owners_are_the_local_owners_and_replay_keeps_every_owner(
    projector: Projector,
) -> None:
    """An `asset/imported` written before owners were recorded (no `owner` field) belongs to
    `local`, the install's owner; replaying ASSETS rebuilds exactly the same owners."""
    asset = cards.decode_file((CARDS / "v2_mira.png").read_bytes(), None, "v2_mira")
    old = json.loads(encode(importer.event_for(asset, "v2_mira.png", None, datetime.now(UTC))))
    del old["payload"]["owner"]
    subject = subjects.asset_event("character", asset.asset_id, "asset/imported")
    await projector.bus.js.publish(subject, json.dumps(old).encode(), stream=ASSETS.name)
    alices = await import_as(projector, "v2_mira.png", "alice")
    await import_as(projector, "world_cael.json", "bob")
    await projector.caught_up("assets")
    before = await _owners(projector)
    assert before[asset.asset_id] == "local"
    assert before[alices] == "alice"
    assert "bob" in before.values()

    local = await projector.rpc("character.get", {"character": asset.asset_id}, headers=LOCAL)
    assert local["source"]["owner"] == "local"
    assert (await projector.rpc("character.get", {"character": asset.asset_id}, headers=ALICE))[
        "error"
    ]["code"] == "not_found"

    options = options_of(projector.settings)
    report = await operations.replay(
        projector.pool, projector.bus.js, options, operations.plan("assets"), _ignore
    )
    assert report.entries >= 3
    assert await _owners(projector) == before


async def _owners(projector: Projector) -> dict[str, str]:
    async with projector.pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT asset_id, owner FROM projector.characters
               UNION ALL SELECT asset_id, owner FROM projector.lorebooks
               UNION ALL SELECT asset_id, owner FROM projector.personas"""
        )
    return {r["asset_id"]: r["owner"] for r in rows}


def _ignore(*_: object) -> None:
    return None
