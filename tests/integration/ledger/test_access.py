"""Principals through the running ledger: user B cannot search, read, export, correct, redact
or delete user A's memory by naming it; every refusal is audited; A and the operator can; a
request without a principal, or with a forged or expired one, is refused."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nats
import pytest

from tavern_cli.main import main
from tavern_events import subjects
from tavern_runtime import principals
from tavern_runtime.auth import Credentials
from tests.integration.ledger.conftest import LedgerBus
from tests.support import TEST_AUTH_KEY, auth, eventually, signed_user
from tests.unit.ledger.builders import session_created, user_message

pytestmark = pytest.mark.integration

ALICE, BOB = signed_user("alice"), signed_user("bob")  # signed when used
ALICE_SEARCH = {"session_id": "a1", "query": "locker"}


async def alice_and_bob(ledger: LedgerBus) -> dict[str, Any]:
    """Alice's session a1 (chat chat_a) with one fact and one memory; Bob's session b1."""
    await ledger.publish(session_created("a1", chat_id="chat_a", owner="alice"))
    await ledger.publish(session_created("b1", chat_id="chat_b", owner="bob"))
    last = await ledger.publish(user_message("a1", 2, "My cat is called Miso"))
    await ledger.ingested_through(last)
    await eventually(lambda: bound(ledger, "a1", "b1"), timeout=10)
    [row] = await ledger.evidence(session_id="a1")
    wrote = await ledger.rpc(
        "memory.write",
        headers=ALICE,
        session_id="a1",
        scope="chat",
        content="Alice's locker code hint",
    )
    assert "error" not in wrote, wrote
    return {"evidence_id": row["id"], "memory_id": wrote["id"]}


async def bound(ledger: LedgerBus, *sessions: str) -> bool:
    found = await ledger.db.fetchval(
        "SELECT count(*) FROM ledger.session_binding WHERE session_id = ANY($1::text[])",
        list(sessions),
    )
    return bool(found == len(sessions))


def requests_naming_alice(ids: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every way Bob could name Alice's memory, session or chat."""
    evidence = {"evidence_id": ids["evidence_id"]}
    return [
        ("query", {"scope_id": "chat_a"}),
        ("query", {"session_id": "a1"}),
        ("recall", {"session_id": "a1", "query": "cat"}),
        ("inspect", evidence),
        ("history", evidence),
        ("export", {"scope_id": "chat_a"}),
        ("stats", {"scope_id": "chat_a"}),
        ("audit", {"scope_id": "chat_a"}),
        ("correct", {**evidence, "text": "My cat is called Rex"}),
        ("correct", {"session_id": "a1", "text": "I have no cat"}),
        ("correct", {"scope_id": "chat_a", "text": "I have no cat"}),
        ("quarantine", evidence),
        ("redact", evidence),
        ("delete", evidence),
        ("memory.search", {"session_id": "a1", "query": "locker"}),
        ("memory.read", {"session_id": "a1", "id": ids["memory_id"]}),
        ("memory.write", {"session_id": "a1", "scope": "chat", "content": "planted by bob"}),
        ("memory.forget", {"session_id": "a1", "id": ids["memory_id"]}),
        ("variable.set", {"session_id": "a1", "scope": "chat", "name": "mood", "value": 1}),
        ("variable.list", {"session_id": "a1", "scope": "chat"}),
    ]


OPERATOR_ONLY: list[tuple[str, dict[str, Any]]] = [
    ("query", {}),
    ("export", {}),
    ("stats", {}),
    ("audit", {}),
    ("import", {"jsonl": ""}),
]
"""Across every scope: only the operator."""


async def refusals(ledger: LedgerBus, actor: str) -> list[dict[str, Any]]:
    rows = await ledger.db.fetch(
        "SELECT op, scope_id, actor, target_id, payload FROM ledger.audit "
        "WHERE op = 'access_refused' AND actor = $1 ORDER BY id",
        actor,
    )
    return [dict(r) for r in rows]


async def test_bob_cannot_touch_alices_memory_by_naming_it_and_each_refusal_is_audited(
    ledger: LedgerBus,
) -> None:
    ids = await alice_and_bob(ledger)
    asked = requests_naming_alice(ids) + OPERATOR_ONLY
    for op, body in asked:
        reply = await ledger.rpc(op, headers=BOB, **body)
        assert reply.get("error", {}).get("code") == "forbidden", (op, body, reply)
        assert "Miso" not in str(reply)
        assert "locker" not in str(reply)
    audited = await refusals(ledger, "user:bob")
    assert [r["payload"] for r in audited] == [
        f'{{"rpc": "{op}", "code": "forbidden"}}' for op, _ in asked
    ]
    # nothing changed: the fact is active and uncorrected, the memory is there, nothing planted
    [row] = await ledger.evidence(scope_id="chat_a")
    assert (row["id"], row["state"]) == (ids["evidence_id"], "active")
    memories = await ledger.db.fetch("SELECT content FROM ledger.memory WHERE scope_id = 'chat_a'")
    assert [m["content"] for m in memories] == ["Alice's locker code hint"]


async def test_alice_and_the_operator_can_use_alices_memory(ledger: LedgerBus) -> None:
    ids = await alice_and_bob(ledger)
    for headers in (ALICE, auth()):
        found = await ledger.rpc("query", headers=headers, scope_id="chat_a")
        kept = sorted((i["claim_kind"], i["content"]) for i in found["items"])
        assert kept == [("fact", "My cat is called Miso"), ("message", "My cat is called Miso")]
        assert (await ledger.rpc("inspect", headers=headers, **ids_of(ids)))["state"] == "active"
        search = await ledger.rpc("memory.search", headers=headers, session_id="a1", query="locker")
        assert [h["content"] for h in search["hits"]] == ["Alice's locker code hint"]
        exported = await ledger.rpc("export", headers=headers, scope_id="chat_a")
        assert "error" not in exported, exported
    corrected = await ledger.rpc("correct", headers=ALICE, text="My cat is Rex", **ids_of(ids))
    assert corrected["superseded"] == ids["evidence_id"]
    redacted = await ledger.rpc("redact", headers=auth(), evidence_id=corrected["evidence_id"])
    assert redacted["to_state"] == "redacted"
    assert (await ledger.rpc("export", headers=auth())).get("error") is None
    assert await refusals(ledger, "user:alice") == []


def ids_of(ids: dict[str, Any]) -> dict[str, Any]:
    return {"evidence_id": ids["evidence_id"]}


async def test_the_loop_acting_for_bob_is_held_to_bobs_rights(ledger: LedgerBus) -> None:
    await alice_and_bob(ledger)
    loop = principals.service("loop")
    for_bob = auth(loop.acting_for("bob"))
    reply = await ledger.rpc("memory.search", headers=for_bob, session_id="a1", query="locker")
    assert reply["error"]["code"] == "forbidden"
    reply = await ledger.rpc("recall", headers=for_bob, session_id="a1", query="cat")
    assert reply["error"]["code"] == "forbidden"
    for_alice = auth(loop.acting_for("alice"))
    reply = await ledger.rpc("memory.search", headers=for_alice, session_id="a1", query="locker")
    assert [h["content"] for h in reply["hits"]] == ["Alice's locker code hint"]
    assert [r["actor"] for r in await refusals(ledger, "service:loop for user:bob")] == [
        "service:loop for user:bob"
    ] * 2


async def test_requests_without_a_genuine_current_principal_are_refused_and_audited(
    ledger: LedgerBus, nats_url: str
) -> None:
    await alice_and_bob(ledger)
    forged = Credentials(b"not-the-deployment-key-0123456789abcdef").headers(principals.OPERATOR)
    expired = Credentials(TEST_AUTH_KEY.encode(), clock=lambda: 1_000_000.0).headers(
        principals.OPERATOR
    )
    cases = {
        "none": {},
        "forged": forged,
        "expired": expired,
        "garbage": {principals.HEADER: "v1.e30.AAAA"},
    }
    plain = await nats.connect(nats_url)  # signs nothing, unlike the fixture's client
    try:
        for name, headers in cases.items():
            for op, body in [("query", {"scope_id": "chat_a"}), ("memory.search", ALICE_SEARCH)]:
                raw = await plain.request(
                    subjects.rpc("ledger", op), json.dumps(body).encode(), 10, headers=headers
                )
                reply = json.loads(raw.data)
                assert reply.get("error", {}).get("code") == "unauthenticated", (name, op, reply)
                assert "Miso" not in str(reply)
    finally:
        await plain.close()
    assert len(await refusals(ledger, "unauthenticated")) == 2 * len(cases)


async def test_bobs_session_naming_alices_chat_gets_none_of_its_memory(
    ledger: LedgerBus,
) -> None:
    await alice_and_bob(ledger)
    await ledger.publish(session_created("b2", chat_id="chat_a", owner="bob"))
    last = await ledger.publish(user_message("b2", 2, "Bob plants a fact in chat_a"))
    await ledger.ingested_through(last)
    await eventually(lambda: bound(ledger, "b2"), timeout=10)
    reply = await ledger.rpc("memory.search", headers=BOB, session_id="b2", query="locker")
    assert reply["error"]["code"] == "forbidden"
    assert "belongs to another user" in reply["error"]["message"]
    recalled = await ledger.rpc("recall", headers=BOB, session_id="b2", query="cat Miso")
    assert "Miso" not in str(recalled)
    # (the loop, the only writer of session logs, refuses a user's session naming a chat:
    # tests/integration/loop/test_access.py)


async def tavern(*argv: str) -> int:
    """Run the `tavern` command in a thread (it runs its own event loop); its exit code."""

    def run() -> int:
        try:
            main(list(argv))
        except SystemExit as exit_:
            return int(exit_.code or 0)
        return 0

    return await asyncio.to_thread(run)


async def test_the_cli_acts_as_the_operator_or_as_the_user_it_is_told(
    ledger: LedgerBus, nats_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await alice_and_bob(ledger)
    query = ("ledger", "query", "--scope", "chat_a", "--nats-url", nats_url)
    assert await tavern(*query, "--user", "bob") == 1
    out, err = capsys.readouterr()
    assert "refused: forbidden" in err
    assert "Miso" not in out
    for who in (("--user", "alice"), ()):
        assert await tavern(*query, *who) == 0
        assert "My cat is called Miso" in capsys.readouterr().out
    [refusal] = await refusals(ledger, "user:bob")
    assert refusal["scope_id"] == "chat_a"


async def test_two_users_of_one_character_each_recall_only_their_own_chats(
    ledger: LedgerBus,
) -> None:
    """Under the shipped reach (every chat with the character), the character's memory is the
    owner's: Alice's other chats with Mira recall her fact, Bob's chat with Mira does not."""
    events = [
        session_created("a1", chat_id="chat-a1", character_id="mira", owner="alice"),
        user_message("a1", 2, "My sister Ines works as a pediatric nurse in Porto"),
        session_created("a2", chat_id="chat-a2", character_id="mira", owner="alice"),
        session_created("b1", chat_id="chat-b1", character_id="mira", owner="bob"),
        user_message("b1", 2, "I live in Lyon and grow tomatoes"),
    ]
    last = 0
    for event in events:
        last = await ledger.publish(event)
    await ledger.ingested_through(last)
    question = "what does Ines do? where do I live?"
    alice = await ledger.rpc("recall", headers=ALICE, session_id="a2", query=question)
    assert "pediatric nurse in Porto" in alice["text"]
    assert "Lyon" not in alice["text"]
    bob = await ledger.rpc("recall", headers=BOB, session_id="b1", query=question)
    assert "Porto" not in bob["text"]
    assert "Lyon" in bob["text"]
    scopes = {r["session_id"]: r["scope_id"] for r in await ledger.evidence()}
    assert scopes["a1"] != scopes["b1"]


async def test_only_the_consolidator_and_the_operator_declare_an_observations_authority(
    ledger: LedgerBus,
) -> None:
    ids = await alice_and_bob(ledger)
    proposal = {
        "scope_id": "chat_a",
        "subject": "cat",
        "predicate": "is called",
        "claim_domain": "user_fact",
        "text": "Miso",
        "evidence_ids": [ids["evidence_id"]],
    }
    declared = await ledger.rpc(
        "observation.propose", headers=ALICE, authority="system_policy", **proposal
    )
    assert declared["error"]["code"] == "forbidden"
    observation = {k: v for k, v in proposal.items() if k != "scope_id"}
    declared_in_batch = await ledger.rpc(
        "observation.propose_batch", headers=ALICE, scope_id="chat_a",
        observations=[observation, {**observation, "authority": "system_policy"}],
    )  # fmt: skip
    assert declared_in_batch["error"]["code"] == "forbidden"
    assert await ledger.db.fetchval("SELECT count(*) FROM ledger.observation") == 0
    derived = await ledger.rpc("observation.propose", headers=ALICE, **proposal)
    assert derived["authority"] == "user_explicit"
    raised = await ledger.rpc(
        "observation.propose", headers=auth(), authority="system_policy",
        **{**proposal, "predicate": "named"},
    )  # fmt: skip
    assert (raised["authority"], raised["derived_authority"]) == ("system_policy", "user_explicit")
