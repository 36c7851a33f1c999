"""The variable store against real NATS and Postgres: compare-and-set, atomic patches, caps,
turn scope, scope refusal."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.ledger.stores.conftest import Ledger
from tests.support import eventually

pytestmark = pytest.mark.integration

S1 = {"session_id": "s1", "turn": 1}


async def test_concurrent_sets_with_the_same_revision_one_wins_one_conflicts(
    ledger: Ledger,
) -> None:
    await ledger.open_session("s1", "chat_1")
    first = await ledger.call("variable.set", {**S1, "scope": "chat", "name": "hp", "value": 10})
    assert (first["revision"], first["type"]) == (1, "integer")

    async def set_to(value: int) -> dict[str, object]:
        request = {**S1, "scope": "chat", "name": "hp", "value": value, "expected_revision": 1}
        reply: dict[str, object] = await ledger.call("variable.set", request)
        return reply

    replies = await asyncio.gather(*(set_to(v) for v in (20, 30, 40, 50)))
    winners = [r for r in replies if "error" not in r]
    losers = [r for r in replies if "error" in r]
    assert len(winners) == 1
    assert [(r["error"]["code"], r["error"]["current_revision"]) for r in losers] == [  # type: ignore[index]
        ("conflict", 2)
    ] * 3
    got = await ledger.call("variable.get", {**S1, "scope": "chat", "name": "hp"})
    assert (got["value"], got["revision"]) == (winners[0]["value"], 2)


async def test_create_of_an_existing_variable_is_a_conflict(ledger: Ledger) -> None:
    await ledger.open_session("s1", "chat_1")
    await ledger.call("variable.set", {**S1, "scope": "chat", "name": "a", "value": 1})
    again = await ledger.call("variable.set", {**S1, "scope": "chat", "name": "a", "value": 2})
    assert again["error"]["code"] == "conflict"
    assert again["error"]["current_revision"] == 1


async def test_patch_is_atomic(ledger: Ledger) -> None:
    await ledger.open_session("s1", "chat_1")
    base = {**S1, "scope": "chat"}
    done = await ledger.call(
        "variable.patch",
        {
            **base,
            "expected_revision": 0,
            "changes": [{"name": "gold", "value": 5}, {"name": "quest.stage", "value": "intro"}],
        },
    )
    assert done["scope_revision"] == 1
    stale = await ledger.call(
        "variable.patch",
        {
            **base,
            "expected_revision": 1,
            "changes": [
                {"name": "gold", "value": 99},
                {"name": "quest.stage", "value": "end", "expected_revision": 7},
            ],
        },
    )
    assert stale["error"]["code"] == "conflict"
    gold = await ledger.call("variable.get", {**base, "name": "gold"})
    assert (gold["value"], gold["scope_revision"]) == (5, 1)  # nothing of the patch landed
    moved = await ledger.call(
        "variable.patch",
        {
            **base,
            "expected_revision": 1,
            "changes": [{"name": "gold", "value": 6}, {"name": "quest.stage", "delete": True}],
        },
    )
    assert (moved["scope_revision"], moved["deleted"]) == (2, ["quest.stage"])
    listed = await ledger.call("variable.list", {**base})
    assert [v["name"] for v in listed["variables"]] == ["gold"]
    old_scope = await ledger.call(
        "variable.patch",
        {**base, "expected_revision": 1, "changes": [{"name": "gold", "value": 7}]},
    )
    assert (old_scope["error"]["code"], old_scope["error"]["current_revision"]) == ("conflict", 2)


async def test_caps_and_names_are_enforced(ledger: Ledger) -> None:
    await ledger.open_session("s1", "chat_1")
    base = {**S1, "scope": "chat"}
    bad_name = await ledger.call("variable.set", {**base, "name": "1bad", "value": 1})
    assert bad_name["error"]["code"] == "invalid"
    big = await ledger.call("variable.set", {**base, "name": "big", "value": "x" * 40_000})
    assert big["error"]["code"] == "too_large"
    chunk = "y" * 30_000
    changes = [{"name": f"v{i}", "value": chunk} for i in range(9)]  # ~270 KB > 256 KiB
    full = await ledger.call("variable.patch", {**base, "expected_revision": 0, "changes": changes})
    assert full["error"]["code"] == "too_large"
    assert "scope would hold" in full["error"]["message"]
    huge = await ledger.call("variable.get", {**base, "name": "a", "pad": "z" * 600_000})
    assert huge["error"]["code"] == "too_large"
    for i in range(3):
        await ledger.call("variable.set", {**base, "name": f"k{i}", "value": {"n": i}})
    listed = await ledger.call("variable.list", {**base, "prefix": "k", "limit": 2})
    assert [v["name"] for v in listed["variables"]] == ["k0", "k1"]
    assert (listed["source_count"], listed["truncated"]) == (3, True)
    assert listed["variables"][0]["summary"] == "{n} (1 keys)"
    nothing = await ledger.call("variable.list", {**base, "limit": 10**6})
    assert len(nothing["variables"]) == 3  # the limit was clamped to the cap, not refused


async def test_turn_scope_expires_at_turn_end(ledger: Ledger) -> None:
    await ledger.open_session("s1", "chat_1")
    turn1 = {"session_id": "s1", "turn": 1, "scope": "turn"}
    await ledger.call("variable.set", {**turn1, "name": "plan", "value": ["a", "b"]})
    await ledger.call("variable.set", {**S1, "scope": "chat", "name": "keep", "value": True})
    assert (await ledger.call("variable.get", {**turn1, "name": "plan"}))["found"]
    await ledger.end_turn("s1", 1)

    async def expired() -> bool:
        reply = await ledger.call("variable.get", {**turn1, "name": "plan"})
        return bool(reply.get("error", {}).get("reason") == "turn_ended")

    await eventually(expired, timeout=10)
    late = await ledger.call("variable.set", {**turn1, "name": "plan", "value": 1})
    assert late["error"]["reason"] == "turn_ended"
    rows = await ledger.db.fetchval("SELECT count(*) FROM ledger.variable WHERE scope = 'turn'")
    assert rows == 0
    turn2 = {"session_id": "s1", "turn": 2, "scope": "turn"}
    assert not (await ledger.call("variable.get", {**turn2, "name": "plan"}))["found"]
    kept = await ledger.call("variable.get", {**S1, "scope": "chat", "name": "keep"})
    assert kept["value"] is True


async def test_delete_is_audited_and_global_scope_is_off_by_default(ledger: Ledger) -> None:
    await ledger.open_session("s1", "chat_1")
    base = {**S1, "scope": "chat"}
    await ledger.call("variable.set", {**base, "name": "a", "value": 1})
    gone = await ledger.call("variable.delete", {**base, "name": "a"})
    assert (gone["found"], gone["scope_revision"]) == (True, 2)
    assert not (await ledger.call("variable.delete", {**base, "name": "a"}))["found"]
    [entry] = await ledger.audit("variable.deleted")
    assert (entry["scope_id"], entry["target_id"], entry["payload"]["tool"]) == (
        "chat_1",
        "a",
        "variable_delete",
    )
    off = await ledger.call("variable.set", {**S1, "scope": "global", "name": "g", "value": 1})
    assert off["error"]["reason"] == "scope_unavailable"


async def test_global_scope_works_when_enabled(ledger_with_global: Ledger) -> None:
    ledger = ledger_with_global
    await ledger.open_session("s1", "chat_1")
    await ledger.open_session("s2", "chat_2")
    await ledger.call("variable.set", {**S1, "scope": "global", "name": "g", "value": 1})
    seen = await ledger.call(
        "variable.get", {"session_id": "s2", "turn": 1, "scope": "global", "name": "g"}
    )
    assert seen["value"] == 1


async def test_forged_scope_is_refused_and_audited(ledger: Ledger) -> None:
    await ledger.open_session("s1", "chat_1", "char_a")
    await ledger.open_session("s2", "chat_2", "char_b")
    await ledger.call("variable.set", {**S1, "scope": "chat", "name": "secret", "value": "s1"})
    forged = await ledger.call(
        "variable.get",
        {"session_id": "s2", "turn": 1, "scope": "chat", "name": "secret", "scope_id": "chat_1"},
    )
    assert forged["error"]["reason"] == "scope_forbidden"
    other_character = await ledger.call(
        "variable.set",
        {
            "session_id": "s2",
            "turn": 1,
            "scope": "character",
            "name": "x",
            "value": 1,
            "character_id": "char_a",
        },
    )
    assert other_character["error"]["reason"] == "scope_forbidden"
    own = await ledger.call(
        "variable.get", {"session_id": "s2", "turn": 1, "scope": "chat", "name": "secret"}
    )
    assert not own["found"]  # s2's chat is its own: s1's value is not there
    audited = await ledger.audit("store.scope_forbidden")
    assert [(a["scope_id"], a["payload"]["named"]) for a in audited] == [
        ("chat_2", {"scope_id": "chat_1"}),
        ("chat_2", {"character_id": "char_a"}),
    ]
    assert {a["payload"]["session_id"] for a in audited} == {"s2"}


async def test_unknown_session_is_refused(ledger: Ledger) -> None:
    reply = await ledger.call("variable.get", {**S1, "scope": "chat", "name": "a"})
    assert reply["error"]["reason"] == "unknown_session"
